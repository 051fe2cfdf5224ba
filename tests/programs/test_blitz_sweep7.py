"""The 60-minute blitz, as written (seeded with torch.manual_seed, modules initialised by
their own constructors, data from torch's random functions; see test_basics_sweep7.py):
the tensors page (creation, the NumPy bridge sharing memory, in-place ops), the neural
networks page (LeNet, backward with a random gradient, the grad_fn chain along
next_functions, the update by hand and with optim) and the CIFAR-10 classifier (iter /
next over a DataLoader, torch.max, per-class accuracy)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def blitz_tensors(torch, env):
    torch.manual_seed(0)
    data = [[1, 2], [3, 4]]
    x_data = torch.tensor(data)
    np_array = np.array(data)
    x_np = torch.from_numpy(np_array)
    x_ones = torch.ones_like(x_data)
    x_rand = torch.rand_like(x_data, dtype=torch.float)
    env.rec("create", (x_data, x_np, x_ones, x_rand))
    shape = (2, 3,)
    env.rec("shaped", (torch.rand(shape), torch.ones(shape), torch.zeros(shape)))
    tensor = torch.rand(3, 4)
    env.rec("attrs", (tuple(tensor.shape), tensor.dtype, str(tensor.device)))
    tensor = torch.ones(4, 4)
    tensor[:, 1] = 0
    env.rec("index", (tensor[0], tensor[:, 0], tensor[..., -1]))
    t1 = torch.cat([tensor, tensor, tensor], dim=1)
    y1 = tensor @ tensor.T
    y2 = tensor.matmul(tensor.T)
    y3 = torch.rand_like(y1)
    torch.matmul(tensor, tensor.T, out=y3)
    z1 = tensor * tensor
    z3 = torch.rand_like(tensor)
    torch.mul(tensor, tensor, out=z3)
    agg = tensor.sum()
    env.rec("ops", (t1, y1, y2, y3, z1, z3, agg.item(), type(agg.item()).__name__))
    tensor.add_(5)
    env.rec("inplace", tensor)
    t = torch.ones(5)
    n = t.numpy()
    t.add_(1)
    env.rec("bridge t->n", n.copy())
    n = np.ones(5)
    t = torch.from_numpy(n)
    np.add(n, 1, out=n)
    env.rec("bridge n->t", (t, t.dtype))


def blitz_neural_networks(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, input):
            c1 = F.relu(self.conv1(input))
            s2 = F.max_pool2d(c1, (2, 2))
            c3 = F.relu(self.conv2(s2))
            s4 = F.max_pool2d(c3, 2)
            s4 = torch.flatten(s4, 1)
            f5 = F.relu(self.fc1(s4))
            f6 = F.relu(self.fc2(f5))
            return self.fc3(f6)

    net = Net()
    params = list(net.parameters())
    env.rec("params", (len(params), tuple(params[0].size())))
    input = torch.randn(1, 1, 32, 32)
    out = net(input)
    env.rec("out", out)
    net.zero_grad()
    out.backward(torch.randn(1, 10))
    env.rec("grads", [p.grad for p in params])
    output = net(input)
    target = torch.randn(10).view(1, -1)
    criterion = nn.MSELoss()
    loss = criterion(output, target)
    fn = loss.grad_fn
    chain = [type(fn).__name__]
    while fn is not None and fn.next_functions:
        chain.append([(type(f).__name__, i) for f, i in fn.next_functions if f is not None])
        fn = next((f for f, _ in fn.next_functions if type(f).__name__ not in
                   ("AccumulateGrad", "NoneType", "TBackward0")), None)
    env.rec("chain", chain)
    net.zero_grad()
    env.rec("conv1.bias.grad before", net.conv1.bias.grad)
    loss.backward()
    env.rec("conv1.bias.grad after", net.conv1.bias.grad)
    learning_rate = 0.01
    for f in net.parameters():
        f.data.sub_(f.grad.data * learning_rate)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)

    def step(input, target):
        optimizer.zero_grad()
        output = net(input)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(input, target) for _ in range(8)])
    env.rec("weights", net.state_dict())


def blitz_cifar(torch, env):
    nn, F = torch.nn, torch.nn.functional
    data = torch.utils.data
    torch.manual_seed(0)
    classes = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
    trainset = data.TensorDataset((torch.rand(40, 3, 32, 32) - 0.5) / 0.5,
                                  torch.randint(0, 10, (40,)))
    testset = data.TensorDataset((torch.rand(20, 3, 32, 32) - 0.5) / 0.5,
                                 torch.randint(0, 10, (20,)))
    trainloader = data.DataLoader(trainset, batch_size=4, shuffle=True, num_workers=0)
    testloader = data.DataLoader(testset, batch_size=4, shuffle=False, num_workers=0)
    dataiter = iter(trainloader)
    images, labels = next(dataiter)
    env.rec("first batch", (" ".join(f"{classes[labels[j]]:5s}" for j in range(4)), images))

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
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    net = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)

    def step(inputs, labels):
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    for epoch in range(2):
        running_loss, log = 0.0, []
        for i, batch in enumerate(trainloader, 0):
            inputs, labels = batch
            running_loss += step(inputs, labels)
            if i % 5 == 4:
                log.append(running_loss / 5)
                running_loss = 0.0
        env.rec(f"epoch {epoch}", log)
    buf_state = {k: v.clone() for k, v in net.state_dict().items()}
    net = Net()
    net.load_state_dict(buf_state)
    correct, total = 0, 0
    correct_pred = {classname: 0 for classname in classes}
    total_pred = {classname: 0 for classname in classes}
    with torch.no_grad():
        for images, labels in testloader:
            outputs = net(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
            for label, prediction in zip(labels, predicted):
                if label == prediction:
                    correct_pred[classes[label]] += 1
                total_pred[classes[label]] += 1
    env.rec("accuracy", (100 * correct // total, correct_pred, total_pred))


PROGRAMS = {f.__name__: f for f in [blitz_tensors, blitz_neural_networks, blitz_cifar]}
SLOW = {"blitz_cifar"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-6)
