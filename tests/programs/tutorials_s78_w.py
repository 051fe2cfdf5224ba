"""Stop 78 (W), part 1: the official PyTorch tutorials "Text classification with the
torchtext library" (EmbeddingBag with offsets; the vocab built by hand, no torchtext),
"NLP From Scratch: classifying names with a character-level RNN" and "generating names"
(a hand-written RNN cell over torch.cat((input, hidden), 1), NLLLoss, the manual update
p.data.add_(p.grad.data, alpha=-learning_rate)) and "Training a classifier" (the CIFAR-10
Net on random images). Toy sizes, synthetic data. Programs `f(torch, env)`, see
tutorial_harness.py."""


def text_classification_embeddingbag(torch, env):
    nn = torch.nn
    lines = ["the cat sat on the mat", "stocks fell sharply today", "the team won the game",
             "new chip speeds up phones", "markets rally on rate cut", "striker scores twice",
             "cat videos go viral", "phones get new chips"]
    labels = [0, 1, 2, 3, 1, 2, 0, 3]
    vocab = {"<unk>": 0}
    for line in lines:
        for tok in line.split():
            vocab.setdefault(tok, len(vocab))
    text_pipeline = lambda x: [vocab.get(t, 0) for t in x.split()]  # noqa: E731

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for _label, _text in batch:
            label_list.append(_label)
            processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
            text_list.append(processed_text)
            offsets.append(processed_text.size(0))
        label_list = torch.tensor(label_list, dtype=torch.int64)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        text_list = torch.cat(text_list)
        return label_list, text_list, offsets

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super(TextClassificationModel, self).__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
            self.fc = nn.Linear(embed_dim, num_class)
            self.init_weights()

        def init_weights(self):
            initrange = 0.5
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.fc.weight.data.uniform_(-initrange, initrange)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            embedded = self.embedding(text, offsets)
            return self.fc(embedded)

    model = env.init(TextClassificationModel(len(vocab), 16, 4))
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)

    def train_step(label, text, offsets):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        return predicted_label, loss
    train_step = env.step(train_step)

    data = list(zip(labels, lines))
    for epoch in range(1, 4):
        model.train()
        total_acc, total_count = 0, 0
        for i in range(0, len(data), 4):
            label, text, offsets = collate_batch(data[i:i + 4])
            predicted_label, loss = train_step(label, text, offsets)
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
            env.rec("loss", loss)
        scheduler.step()
        env.rec("acc", f"| epoch {epoch:3d} | accuracy {total_acc / total_count:8.3f}")
    model.eval()
    with torch.no_grad():
        text = torch.tensor(text_pipeline("the cat won"))
        env.rec("predict", model(text, torch.tensor([0])).argmax(1).item() + 1)
    env.rec("params", dict(model.state_dict()))


def char_rnn_classification(torch, env):
    nn = torch.nn
    all_letters = "abcdefghijklmnopqrstuvwxyz '"
    n_letters = len(all_letters)
    category_lines = {"English": ["smith", "jones", "brown"], "French": ["dubois", "moreau"],
                      "Italian": ["rossi", "russo", "ferrari"]}
    all_categories = list(category_lines)
    n_categories = len(all_categories)

    def letterToIndex(letter):
        return all_letters.find(letter)

    def lineToTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li, letter in enumerate(line):
            tensor[li][0][letterToIndex(letter)] = 1
        return tensor

    class RNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super(RNN, self).__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
            self.i2o = nn.Linear(input_size + hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, input, hidden):
            combined = torch.cat((input, hidden), 1)
            hidden = self.i2h(combined)
            output = self.i2o(combined)
            output = self.softmax(output)
            return output, hidden

        def initHidden(self):
            return torch.zeros(1, self.hidden_size)

    n_hidden = 32
    rnn = env.init(RNN(n_letters, n_hidden, n_categories))
    criterion = nn.NLLLoss()
    learning_rate = 0.005

    def categoryFromOutput(output):
        top_n, top_i = output.topk(1)
        category_i = top_i[0].item()
        return all_categories[category_i], category_i

    def train(category_tensor, line_tensor):
        hidden = rnn.initHidden()
        rnn.zero_grad()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        return output, loss.item()
    train = env.step(train)

    current_loss = 0
    for it in range(1, 13):
        category = all_categories[env.choice(n_categories)]
        names = category_lines[category]
        line = names[env.choice(len(names))]
        category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
        output, loss = train(category_tensor, lineToTensor(line))
        current_loss += loss
        guess, guess_i = categoryFromOutput(output)
        correct = "✓" if guess == category else "✗ (%s)" % category
        env.rec("line", "%d %.4f %s / %s %s" % (it, loss, line, guess, correct))
    env.rec("current_loss", current_loss)

    def evaluate(line_tensor):
        hidden = rnn.initHidden()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        return output

    with torch.no_grad():
        output = evaluate(lineToTensor("rossi"))
        topv, topi = output.topk(3, 1, True)
        env.rec("predict", (topv, topi))
    env.rec("params", dict(rnn.state_dict()))


def char_rnn_generation(torch, env):
    nn = torch.nn
    all_letters = "abcdefghijklmnopqrstuvwxyz"
    n_letters = len(all_letters) + 1    # Plus EOS marker
    category_lines = {"German": ["bauer", "weber"], "Spanish": ["garcia", "lopez", "ruiz"]}
    all_categories = list(category_lines)
    n_categories = len(all_categories)

    class RNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super(RNN, self).__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
            self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
            self.o2o = nn.Linear(hidden_size + output_size, output_size)
            self.dropout = nn.Dropout(0.1)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, category, input, hidden):
            input_combined = torch.cat((category, input, hidden), 1)
            hidden = self.i2h(input_combined)
            output = self.i2o(input_combined)
            output_combined = torch.cat((hidden, output), 1)
            output = self.o2o(output_combined)
            output = self.dropout(output)
            output = self.softmax(output)
            return output, hidden

        def initHidden(self):
            return torch.zeros(1, self.hidden_size)

    def categoryTensor(category):
        li = all_categories.index(category)
        tensor = torch.zeros(1, n_categories)
        tensor[0][li] = 1
        return tensor

    def inputTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li in range(len(line)):
            tensor[li][0][all_letters.find(line[li])] = 1
        return tensor

    def targetTensor(line):
        letter_indexes = [all_letters.find(line[li]) for li in range(1, len(line))]
        letter_indexes.append(n_letters - 1)  # EOS
        return torch.LongTensor(letter_indexes)

    rnn = env.init(RNN(n_letters, 24, n_letters))
    criterion = nn.NLLLoss()
    learning_rate = 0.0005

    def train(category_tensor, input_line_tensor, target_line_tensor):
        target_line_tensor.unsqueeze_(-1)
        hidden = rnn.initHidden()
        rnn.zero_grad()
        loss = torch.Tensor([0])  # you can also just simply use ``loss = 0``
        for i in range(input_line_tensor.size(0)):
            output, hidden = rnn(category_tensor, input_line_tensor[i], hidden)
            l = criterion(output, target_line_tensor[i])  # noqa: E741
            loss += l
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        return output, loss.item() / input_line_tensor.size(0)
    train = env.step(train)

    rnn.train()
    for it in range(8):
        category = all_categories[env.choice(n_categories)]
        line = category_lines[category][env.choice(len(category_lines[category]))]
        output, loss = train(categoryTensor(category), inputTensor(line), targetTensor(line))
        env.rec("loss", loss, cross=False)      # (dropout: llgrad's stream)
    rnn.eval()
    max_length = 6

    def sample(category, start_letter="a"):
        with torch.no_grad():
            category_tensor = categoryTensor(category)
            input = inputTensor(start_letter)
            hidden = rnn.initHidden()
            output_name = start_letter
            for i in range(max_length):
                output, hidden = rnn(category_tensor, input[0], hidden)
                topv, topi = output.topk(1)
                topi = topi[0][0]
                if topi == n_letters - 1:
                    break
                else:
                    letter = all_letters[topi]
                    output_name += letter
                input = inputTensor(letter)
            return output_name

    env.rec("samples", [sample("German", c) for c in "bwg"], cross=False)
    env.rec("params", dict(rnn.state_dict()), cross=False)


def cifar_classifier(torch, env):
    nn = torch.nn
    F = torch.nn.functional
    optim = torch.optim

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = torch.flatten(x, 1)  # flatten all dimensions except batch
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    net = env.init(Net())
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    images = env.randn(16, 3, 32, 32)
    targets = env.randint(0, 10, (16,))
    trainset = torch.utils.data.TensorDataset(images, targets)
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=4, shuffle=False)

    def step(inputs, labels):
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss
    step = env.step(step)

    for epoch in range(2):
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            inputs, labels = data
            loss = step(inputs, labels)
            running_loss += loss.item()
            if i % 2 == 1:
                env.rec("print", f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 2:.3f}")
                running_loss = 0.0
    correct = 0
    total = 0
    with torch.no_grad():
        outputs = net(images)
        _, predicted = torch.max(outputs.data, 1)
        total += targets.size(0)
        correct += (predicted == targets).sum().item()
    env.rec("acc", f"Accuracy of the network on the 16 test images: {100 * correct // total} %")
    env.rec("params", dict(net.state_dict()))
