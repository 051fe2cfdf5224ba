"""Official tutorials and docs the other files leave out, nearly verbatim (sweep 22, H2 part
H): "Optional: Data Parallelism" (a RandomDataset, the model wrapped in nn.DataParallel,
which on a machine without GPUs runs the module itself, its forward printing sizes, then
trained through the wrapper);
"Hyperparameter tuning with Ray Tune"'s train_cifar without Ray (the config dict,
random_split of the train set, a checkpoint dict pickled to a directory each epoch and
resumed from, validation loss accumulated as NumPy values); the torch.compiler docs'
`@torch.compiler.disable` on a submodule that does NumPy work inside a compiled step.
Synthetic CIFAR-like data. Programs `f(torch, env)`, see tutorial_harness.py."""
import contextlib
import io
import os
import pickle
import tempfile
from pathlib import Path

import numpy as np


def data_parallel(torch, env):
    nn = torch.nn
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader

    # Parameters and DataLoaders
    input_size = 5
    output_size = 2

    batch_size = 30
    data_size = 100

    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    class RandomDataset(Dataset):

        def __init__(self, size, length):
            self.len = length
            self.data = torch.randn(length, size)

        def __getitem__(self, index):
            return self.data[index]

        def __len__(self):
            return self.len

    torch.manual_seed(0)
    rand_loader = DataLoader(dataset=RandomDataset(input_size, data_size),
                             batch_size=batch_size, shuffle=True)
    printed = io.StringIO()     # (the tutorial's prints, compared in torch's spelling)

    class Model(nn.Module):
        # Our model

        def __init__(self, input_size, output_size):
            super(Model, self).__init__()
            self.fc = nn.Linear(input_size, output_size)

        def forward(self, input):
            output = self.fc(input)
            print("\tIn Model: input size", input.size(),
                  "output size", output.size())
            return output

    model = Model(input_size, output_size)
    # (the tutorial wraps when torch.cuda.device_count() > 1; wrapped here on the CPU too)
    model = nn.DataParallel(model)
    model.to(device)

    with contextlib.redirect_stdout(printed):
        for i, data in enumerate(rand_loader):
            input = data.to(device)
            output = model(input)
            print("Outside: input size", input.size(),
                  "output_size", output.size())
            env.rec(f"output {i}", output)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    target = env.randn(output_size)

    def step(input):
        optimizer.zero_grad()
        loss = ((model(input) - target) ** 2).mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(step)
    with contextlib.redirect_stdout(printed):
        for epoch in range(2):
            for i, data in enumerate(rand_loader):
                env.rec(f"loss {epoch} {i}", step(data.to(device)))
    env.rec("printed", printed.getvalue().replace(torch.__name__ + ".Size", "torch.Size"))
    env.rec("state", model.module.state_dict())
    env.rec("wrapped keys", sorted(model.state_dict()))


def ray_tune_train_cifar(torch, env):
    nn, optim, F = torch.nn, torch.optim, torch.nn.functional
    random_split = torch.utils.data.random_split

    class Net(nn.Module):
        def __init__(self, l1=120, l2=84):
            super(Net, self).__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 1 * 1, l1)
            self.fc2 = nn.Linear(l1, l2)
            self.fc3 = nn.Linear(l2, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = torch.flatten(x, 1)  # flatten all dimensions except batch
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    def load_data():
        trainset = torch.utils.data.TensorDataset(env.randn(20, 3, 16, 16),
                                                  env.randint(0, 10, (20,)))
        testset = torch.utils.data.TensorDataset(env.randn(8, 3, 16, 16),
                                                 env.randint(0, 10, (8,)))
        return trainset, testset

    checkpoint_root = env.path("ray")
    reports = []

    def train_cifar(config, n_epochs, resume):
        net = Net(config["l1"], config["l2"])

        device = "cpu"
        net.to(device)

        criterion = nn.CrossEntropyLoss()
        optimizer = optim.SGD(net.parameters(), lr=config["lr"], momentum=0.9)

        if resume:
            data_path = Path(checkpoint_root) / "data.pkl"
            with open(data_path, "rb") as fp:
                checkpoint_state = pickle.load(fp)
            start_epoch = checkpoint_state["epoch"] + 1
            net.load_state_dict(checkpoint_state["net_state_dict"])
            optimizer.load_state_dict(checkpoint_state["optimizer_state_dict"])
        else:
            start_epoch = 0

        trainset, testset = load_data()

        test_abs = int(len(trainset) * 0.8)
        train_subset, val_subset = random_split(
            trainset, [test_abs, len(trainset) - test_abs])

        trainloader = torch.utils.data.DataLoader(
            train_subset, batch_size=int(config["batch_size"]), shuffle=True, num_workers=0)
        valloader = torch.utils.data.DataLoader(
            val_subset, batch_size=int(config["batch_size"]), shuffle=True, num_workers=0)

        def train_step(inputs, labels):
            # zero the parameter gradients
            optimizer.zero_grad()

            # forward + backward + optimize
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            return loss

        train_step = env.step(train_step)
        for epoch in range(start_epoch, n_epochs):  # loop over the dataset multiple times
            running_loss = 0.0
            epoch_steps = 0
            for i, data in enumerate(trainloader, 0):
                # get the inputs; data is a list of [inputs, labels]
                inputs, labels = data
                inputs, labels = inputs.to(device), labels.to(device)
                loss = train_step(inputs, labels)
                # print statistics
                running_loss += loss.item()
                epoch_steps += 1

            # Validation loss
            val_loss = 0.0
            val_steps = 0
            total = 0
            correct = 0
            for i, data in enumerate(valloader, 0):
                with torch.no_grad():
                    inputs, labels = data
                    inputs, labels = inputs.to(device), labels.to(device)

                    outputs = net(inputs)
                    _, predicted = torch.max(outputs.data, 1)
                    total += labels.size(0)
                    correct += (predicted == labels).sum().item()

                    loss = criterion(outputs, labels)
                    val_loss += loss.cpu().numpy()
                    val_steps += 1

            checkpoint_data = {
                "epoch": epoch,
                "net_state_dict": net.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(),
            }
            os.makedirs(checkpoint_root, exist_ok=True)
            with tempfile.TemporaryDirectory() as checkpoint_dir:
                data_path = Path(checkpoint_dir) / "data.pkl"
                with open(data_path, "wb") as fp:
                    pickle.dump(checkpoint_data, fp)
                os.replace(data_path, Path(checkpoint_root) / "data.pkl")
            reports.append({"loss": float(val_loss / val_steps), "accuracy": correct / total,
                            "train": running_loss / epoch_steps})
        return net

    config = {"l1": 8, "l2": 4, "lr": 0.01, "batch_size": 4}
    torch.manual_seed(0)
    train_cifar(config, n_epochs=2, resume=False)
    net = train_cifar(config, n_epochs=3, resume=True)
    env.rec("reports", [tuple(r.values()) for r in reports])
    env.rec("state", net.state_dict())

    def test_accuracy(net, device="cpu"):
        trainset, testset = load_data()
        testloader = torch.utils.data.DataLoader(testset, batch_size=4, shuffle=False,
                                                 num_workers=0)
        correct = 0
        total = 0
        with torch.no_grad():
            for data in testloader:
                images, labels = data
                images, labels = images.to(device), labels.to(device)
                outputs = net(images)
                _, predicted = torch.max(outputs.data, 1)
                total += labels.size(0)
                correct += (predicted == labels).sum().item()
        return correct / total

    env.rec("test accuracy", test_accuracy(net))


def compiler_disable(torch, env):
    nn = torch.nn

    class Augment(nn.Module):
        @torch.compiler.disable
        def forward(self, x):
            # NumPy work the compiler is told not to trace
            a = x.detach().numpy()
            return x + torch.from_numpy(np.tanh(a))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(4, 4)
            self.aug = Augment()
            self.l2 = nn.Linear(4, 1)

        def forward(self, x):
            return self.l2(torch.relu(self.aug(self.l1(x))))

    model = env.init(Model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step)
    x = env.randn(3, 4)
    for i in range(3):
        env.rec(f"loss {i}", step(x))
    env.rec("state", model.state_dict())
