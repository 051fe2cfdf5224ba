"""Official tutorials the other files leave out, nearly verbatim (sweep 22, H2 part F): the
"Knowledge Distillation" tutorial's second and third runs: the cosine-loss run
(ModifiedDeepNNCosine's flattened features avg_pool1d-ed to the student's size,
CosineEmbeddingLoss with a target of ones, the students started from the plain students'
state_dicts) and the intermediate-regressor run (a Conv2d regressor on the student's feature
map, MSELoss against the teacher's). Small images and channels; synthetic CIFAR-like data.
Programs `f(torch, env)`, see tutorial_harness.py."""


def kd_hidden_representations(torch, env):
    nn, optim = torch.nn, torch.optim

    def teacher_features():
        return nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(16, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )

    def student_features():
        return nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(16, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )

    class DeepNN(nn.Module):
        def __init__(self, num_classes=10):
            super(DeepNN, self).__init__()
            self.features = teacher_features()
            self.classifier = nn.Sequential(
                nn.Linear(128, 32),
                nn.ReLU(),
                nn.Dropout(0.1),
                nn.Linear(32, num_classes)
            )

        def forward(self, x):
            x = self.features(x)
            x = torch.flatten(x, 1)
            x = self.classifier(x)
            return x

    class LightNN(nn.Module):
        def __init__(self, num_classes=10):
            super(LightNN, self).__init__()
            self.features = student_features()
            self.classifier = nn.Sequential(
                nn.Linear(64, 16),
                nn.ReLU(),
                nn.Dropout(0.1),
                nn.Linear(16, num_classes)
            )

        def forward(self, x):
            x = self.features(x)
            x = torch.flatten(x, 1)
            x = self.classifier(x)
            return x

    class ModifiedDeepNNCosine(DeepNN):
        def forward(self, x):
            x = self.features(x)
            flattened_conv_output = torch.flatten(x, 1)
            x = self.classifier(flattened_conv_output)
            flattened_conv_output_after_pooling = torch.nn.functional.avg_pool1d(
                flattened_conv_output, 2)
            return x, flattened_conv_output_after_pooling

    class ModifiedLightNNCosine(LightNN):
        def forward(self, x):
            x = self.features(x)
            flattened_conv_output = torch.flatten(x, 1)
            x = self.classifier(flattened_conv_output)
            return x, flattened_conv_output

    class ModifiedDeepNNRegressor(DeepNN):
        def forward(self, x):
            x = self.features(x)
            conv_feature_map = x
            x = torch.flatten(x, 1)
            x = self.classifier(x)
            return x, conv_feature_map

    class ModifiedLightNNRegressor(LightNN):
        def __init__(self, num_classes=10):
            super(ModifiedLightNNRegressor, self).__init__(num_classes)
            # Include an extra regressor (in our case linear)
            self.regressor = nn.Sequential(
                nn.Conv2d(16, 32, kernel_size=3, padding=1)
            )

        def forward(self, x):
            x = self.features(x)
            regressor_output = self.regressor(x)
            x = torch.flatten(x, 1)
            x = self.classifier(x)
            return x, regressor_output

    torch.manual_seed(42)
    nn_deep = DeepNN(num_classes=10)
    nn_light = LightNN(num_classes=10)
    inputs_all = env.randn(12, 3, 8, 8)
    labels_all = env.randint(0, 10, (12,))
    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(inputs_all, labels_all), batch_size=4, shuffle=True)

    def train_cosine_loss(teacher, student, train_loader, epochs, learning_rate,
                          hidden_rep_loss_weight, ce_loss_weight):
        ce_loss = nn.CrossEntropyLoss()
        cosine_loss = nn.CosineEmbeddingLoss()
        optimizer = optim.Adam(student.parameters(), lr=learning_rate)

        teacher.eval()  # Teacher set to evaluation mode
        student.train()  # Student to train mode

        def step(inputs, labels):
            optimizer.zero_grad()

            # Forward pass with the teacher model and keep only the hidden representation
            with torch.no_grad():
                _, teacher_hidden_representation = teacher(inputs)

            # Forward pass with the student model
            student_logits, student_hidden_representation = student(inputs)

            # Calculate the cosine loss. Target is a vector of ones. From the loss formula
            # above we can see that is the case where loss minimization leads to cosine
            # similarity increase.
            hidden_rep_loss = cosine_loss(student_hidden_representation,
                                          teacher_hidden_representation,
                                          target=torch.ones(inputs.size(0)))

            # Calculate the true label loss
            label_loss = ce_loss(student_logits, labels)

            # Weighted sum of the two losses
            loss = hidden_rep_loss_weight * hidden_rep_loss + ce_loss_weight * label_loss

            loss.backward()
            optimizer.step()
            return loss

        step = env.step(step)
        losses = []
        for epoch in range(epochs):
            running_loss = 0.0
            for inputs, labels in train_loader:
                running_loss += step(inputs, labels).item()
            losses.append(running_loss / len(train_loader))
        return losses

    modified_nn_deep = ModifiedDeepNNCosine(num_classes=10)
    modified_nn_deep.load_state_dict(nn_deep.state_dict())
    modified_nn_light = ModifiedLightNNCosine(num_classes=10)
    modified_nn_light.load_state_dict(nn_light.state_dict())
    sample_input = inputs_all[:2]
    modified_nn_deep.eval()
    logits, hidden_representation = modified_nn_light(sample_input)
    env.rec("student shapes", (tuple(logits.shape), tuple(hidden_representation.shape)))
    env.rec("teacher pooled", modified_nn_deep(sample_input)[1])
    env.rec("cosine losses", train_cosine_loss(
        teacher=modified_nn_deep, student=modified_nn_light, train_loader=train_loader,
        epochs=2, learning_rate=0.001, hidden_rep_loss_weight=0.25, ce_loss_weight=0.75))
    env.rec("cosine student", modified_nn_light.state_dict())

    def train_mse_loss(teacher, student, train_loader, epochs, learning_rate,
                       feature_map_weight, ce_loss_weight):
        ce_loss = nn.CrossEntropyLoss()
        mse_loss = nn.MSELoss()
        optimizer = optim.Adam(student.parameters(), lr=learning_rate)

        teacher.eval()  # Teacher set to evaluation mode
        student.train()  # Student to train mode

        def step(inputs, labels):
            optimizer.zero_grad()

            # Again ignore teacher logits
            with torch.no_grad():
                _, teacher_feature_map = teacher(inputs)

            # Forward pass with the student model
            student_logits, regressor_feature_map = student(inputs)

            # Calculate the loss
            hidden_rep_loss = mse_loss(regressor_feature_map, teacher_feature_map)

            # Calculate the true label loss
            label_loss = ce_loss(student_logits, labels)

            # Weighted sum of the two losses
            loss = feature_map_weight * hidden_rep_loss + ce_loss_weight * label_loss

            loss.backward()
            optimizer.step()
            return loss

        step = env.step(step)
        losses = []
        for epoch in range(epochs):
            running_loss = 0.0
            for inputs, labels in train_loader:
                running_loss += step(inputs, labels).item()
            losses.append(running_loss / len(train_loader))
        return losses

    torch.manual_seed(42)
    modified_nn_light_reg = ModifiedLightNNRegressor(num_classes=10)
    modified_nn_deep_reg = ModifiedDeepNNRegressor(num_classes=10)
    modified_nn_deep_reg.load_state_dict(nn_deep.state_dict())
    env.rec("regressor losses", train_mse_loss(
        teacher=modified_nn_deep_reg, student=modified_nn_light_reg,
        train_loader=train_loader, epochs=2, learning_rate=0.001, feature_map_weight=0.25,
        ce_loss_weight=0.75))
    env.rec("regressor student", modified_nn_light_reg.state_dict())

    def test(model, inputs, labels):
        model.eval()
        correct = 0
        with torch.no_grad():
            outputs = model(inputs)
            if isinstance(outputs, tuple):
                outputs = outputs[0]
            _, predicted = torch.max(outputs.data, 1)
            correct += (predicted == labels).sum().item()
        return 100 * correct / labels.size(0)

    env.rec("accuracies", (test(modified_nn_light, inputs_all, labels_all),
                           test(modified_nn_light_reg, inputs_all, labels_all)))
