"""Official tutorials the other files leave out, nearly verbatim (sweep 21b, C): the YouTube
series' "Introduction to PyTorch Tensors" (creation, *_like, dtypes, arithmetic,
broadcasting, the math zoo, in-place and out= forms, copying, shape changes, the NumPy
bridge); the recipes "Saving and loading multiple models in one file", "Warmstarting model
using parameters from a different model" and "Saving and loading a general checkpoint";
"Datasets & DataLoaders" with "Transforms". Programs `f(torch, env)`, see
tutorial_harness.py."""
import math

import numpy as np


def tensors_intro(torch, env):
    r = {}
    x = torch.empty(3, 4)
    r["empty"] = (type(x).__name__ == "Tensor", tuple(x.shape), x.dtype)
    r["zeros"] = torch.zeros(2, 3)
    r["ones"] = torch.ones(2, 3)
    x = torch.empty(2, 2, 3)
    r["empty_like"] = tuple(torch.empty_like(x).shape)
    r["zeros_like"] = torch.zeros_like(x)
    r["ones_like"] = torch.ones_like(x)
    r["full_like"] = torch.full_like(x, 7)
    some_constants = torch.tensor([[3.1415926, 2.71828], [1.61803, 0.0072897]])
    some_integers = torch.tensor((2, 3, 5, 7, 11, 13, 17, 19))
    more_integers = torch.tensor(((2, 4, 6), [3, 6, 9]))
    r["literals"] = (some_constants, some_integers, more_integers)
    a = torch.ones((2, 3), dtype=torch.int16)
    b = env.rand(2, 3, ) * 20.
    c = b.to(torch.int32)
    r["dtypes"] = (a, b, c, a.dtype, c.dtype)

    ones = torch.zeros(2, 2) + 1
    twos = torch.ones(2, 2) * 2
    threes = (torch.ones(2, 2) * 7 - 1) / 2
    fours = twos ** 2
    sqrt2s = twos ** 0.5
    r["arith"] = (ones, twos, threes, fours, sqrt2s)
    powers2 = twos ** torch.tensor([[1, 2], [3, 4]])
    fives = ones + fours
    dozens = threes * fours
    r["tensor arith"] = (powers2, fives, dozens)
    a = env.rand(2, 3)
    b = env.rand(3, 2)
    try:
        a * b
        r["shape error"] = "no error"
    except RuntimeError:
        r["shape error"] = "RuntimeError"

    rand = env.rand(2, 4)
    doubled = rand * (torch.ones(1, 4) * 2)
    r["broadcast"] = doubled
    a = torch.ones(4, 3, 2)
    b = a * env.rand(3, 2)   # 3rd & 2nd dims identical to a, dim 1 absent
    c = a * env.rand(3, 1)   # 3rd dim = 1, 2nd dim identical to a
    d = a * env.rand(1, 2)   # 3rd dim identical to a, 2nd dim = 1
    r["broadcast 3"] = (b, c, d)

    a = env.rand(2, 4) * 2 - 1
    r["common"] = (torch.abs(a), torch.ceil(a), torch.floor(a), torch.clamp(a, -0.5, 0.5))
    angles = torch.tensor([0, math.pi / 4, math.pi / 2, 3 * math.pi / 4])
    sines = torch.sin(angles)
    inverses = torch.asin(sines)
    r["trig"] = (angles, sines, inverses)
    b = torch.tensor([1, 5, 11])
    c = torch.tensor([2, 7, 10])
    r["bitwise_xor"] = torch.bitwise_xor(b, c)
    d = torch.tensor([[1., 2.], [3., 4.]])
    e = torch.ones(1, 2)  # many comparison ops support broadcasting!
    r["eq"] = torch.eq(d, e)
    r["reductions"] = (torch.max(d), torch.max(d).item(), torch.mean(d), torch.std(d),
                       torch.prod(d), torch.unique(torch.tensor([1, 2, 1, 2, 1, 2])))
    v1 = torch.tensor([1., 0., 0.])         # x unit vector
    v2 = torch.tensor([0., 1., 0.])         # y unit vector
    m1 = env.rand(2, 2)                     # random matrix
    m2 = torch.tensor([[3., 0.], [0., 3.]])  # three times identity matrix
    r["cross"] = (torch.linalg.cross(v2, v1), torch.linalg.cross(v1, v2))
    m3 = torch.linalg.matmul(m1, m2)
    r["matmul"] = m3
    r["svd S"] = torch.linalg.svd(m3)[1]

    a = torch.tensor([0, math.pi / 4, math.pi / 2, 3 * math.pi / 4])
    r["sin"] = torch.sin(a)
    r["a after sin"] = a
    b = torch.tensor([0, math.pi / 4, math.pi / 2, 3 * math.pi / 4])
    r["sin_"] = torch.sin_(b)
    r["b after sin_"] = b
    a = torch.ones(2, 2)
    b = env.rand(2, 2)
    r["add_"] = (a.add_(b), a)
    r["mul_"] = (b.mul_(b), b)
    a = env.rand(2, 2)
    b = env.rand(2, 2)
    c = torch.zeros(2, 2)
    old_id = id(c)
    d = torch.matmul(a, b, out=c)
    r["out="] = (c, id(c) == old_id, id(c) == id(d))
    torch.rand(2, 2, out=c)
    r["rand out= same object"] = id(c) == old_id

    a = torch.ones(2, 2)
    b = a
    a[0][1] = 561  # we change a...
    r["alias"] = b
    a = torch.ones(2, 2)
    b = a.clone()
    r["clone"] = (b is not a, torch.eq(a, b))
    a[0][1] = 561
    r["clone after"] = b
    a = env.rand(2, 2)
    a.requires_grad_()
    b = a.clone()
    c = a.detach().clone()
    r["clone grad"] = (b.requires_grad, c.requires_grad, a.requires_grad)

    a = env.rand(3, 226, 226)
    b = a.unsqueeze(0)
    r["unsqueeze"] = (tuple(a.shape), tuple(b.shape))
    c = env.rand(1, 1, 1, 1, 1)
    r["squeeze c"] = tuple(c.squeeze().shape)
    a = env.rand(1, 20)
    b = a.squeeze(0)
    c = env.rand(2, 2)
    d = c.squeeze(0)
    r["squeeze"] = (tuple(b.shape), tuple(d.shape))
    a = torch.ones(4, 3, 2)
    c = a * env.rand(3, 1)
    b = env.rand(3)     # trying to multiply a * b will give a runtime error
    c = b.unsqueeze(1)  # change to a 2-dimensional tensor, adding new dim at the end
    r["unsqueeze broadcast"] = a * c
    batch_me = env.rand(3, 226, 226)
    batch_me.unsqueeze_(0)
    r["unsqueeze_"] = tuple(batch_me.shape)
    output3d = env.rand(6, 20, 20)
    input1d = output3d.reshape(6 * 20 * 20)
    r["reshape"] = (tuple(input1d.shape), tuple(torch.reshape(output3d, (6 * 20 * 20,)).shape))

    numpy_array = np.ones((2, 3))
    pytorch_tensor = torch.from_numpy(numpy_array)
    numpy_array[1, 1] = 23
    r["from_numpy shares"] = pytorch_tensor
    pytorch_rand = env.rand(2, 3)
    numpy_rand = pytorch_rand.numpy()
    pytorch_rand[1, 1] = 17
    r["numpy shares"] = numpy_rand.copy()
    r["numpy dtype"] = (str(numpy_rand.dtype), pytorch_tensor.dtype)
    for k, v in r.items():
        env.rec(k, v)

    # (a step over the tutorial's ops, compiled)
    w = env.rand(2, 3)
    w.requires_grad_()

    def step(x):
        y = torch.clamp(torch.sin(x * w) + w.unsqueeze(0).squeeze(0) ** 2, -0.5, 0.8)
        loss = torch.std(y) + torch.mean(torch.abs(torch.floor(x) - y)) + torch.prod(y[0])
        loss.backward()
        with torch.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad.zero_()
        return loss

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(env.rand(2, 3) * 3))
    env.rec("w", w)


def _nets(torch):
    nn = torch.nn
    F = torch.nn.functional

    class NetA(nn.Module):
        def __init__(self):
            super(NetA, self).__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = x.view(-1, 16 * 5 * 5)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    class NetB(nn.Module):
        def __init__(self):
            super(NetB, self).__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)
            self.fc4 = nn.Linear(10, 3)      # (the warmstart recipe's extra head)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = x.view(-1, 16 * 5 * 5)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc4(F.relu(self.fc3(x)))
            return x

    return NetA, NetB


def save_load_recipes(torch, env):
    NetA, NetB = _nets(torch)
    netA = env.init(NetA())
    netB = env.init(NetB())
    optimizerA = torch.optim.SGD(netA.parameters(), lr=0.001, momentum=0.9)
    optimizerB = torch.optim.SGD(netB.parameters(), lr=0.001, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    inputs, labels = env.rand(4, 3, 32, 32), env.randint(0, 3, (4,))

    def train(net, optimizer, inputs, labels):
        optimizer.zero_grad()
        loss = criterion(net(inputs), labels)
        loss.backward()
        optimizer.step()
        return loss.item()

    train = env.step(train)
    env.rec("A", train(netA, optimizerA, inputs, labels))
    env.rec("B", train(netB, optimizerB, inputs, labels))

    # Saving and loading multiple models in one file
    PATH = env.path("model.pt")
    torch.save({
                'modelA_state_dict': netA.state_dict(),
                'modelB_state_dict': netB.state_dict(),
                'optimizerA_state_dict': optimizerA.state_dict(),
                'optimizerB_state_dict': optimizerB.state_dict(),
                }, PATH)
    modelA = NetA()
    modelB = NetB()
    optimModelA = torch.optim.SGD(modelA.parameters(), lr=0.001, momentum=0.9)
    optimModelB = torch.optim.SGD(modelB.parameters(), lr=0.001, momentum=0.9)
    checkpoint = torch.load(PATH, weights_only=True)
    modelA.load_state_dict(checkpoint['modelA_state_dict'])
    modelB.load_state_dict(checkpoint['modelB_state_dict'])
    optimModelA.load_state_dict(checkpoint['optimizerA_state_dict'])
    optimModelB.load_state_dict(checkpoint['optimizerB_state_dict'])
    env.rec("optimizer state keys", sorted(checkpoint['optimizerA_state_dict'].keys()))
    env.rec("param_groups", [{k: v for k, v in g.items() if k != "params"} for g in
                             optimModelA.state_dict()["param_groups"]])
    modelA.train()
    modelB.train()
    env.rec("A reloaded", train(modelA, optimModelA, inputs, labels))
    env.rec("B reloaded", train(modelB, optimModelB, inputs, labels))
    env.rec("A continued", train(netA, optimizerA, inputs, labels))
    env.rec("A same", list(modelA.parameters()) + list(netA.parameters()))

    # Warmstarting model using parameters from a different model
    PATH = env.path("netA.pt")
    torch.save(netA.state_dict(), PATH)
    netB = NetB()
    result = netB.load_state_dict(torch.load(PATH, weights_only=True), strict=False)
    env.rec("missing", sorted(result.missing_keys))
    env.rec("unexpected", sorted(result.unexpected_keys))
    env.rec("warm conv1", netB.conv1.weight)
    try:
        netB.load_state_dict(torch.load(PATH, weights_only=True))
        env.rec("strict", "no error")
    except RuntimeError as e:
        env.rec("strict", "Missing key(s)" in str(e) and "fc4.weight" in str(e))

    # Saving and loading a general checkpoint
    EPOCH, LOSS = 5, 0.4
    PATH = env.path("model.pt")
    torch.save({
                'epoch': EPOCH,
                'model_state_dict': netA.state_dict(),
                'optimizer_state_dict': optimizerA.state_dict(),
                'loss': LOSS,
                }, PATH)
    model = NetA()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    checkpoint = torch.load(PATH, weights_only=True)
    model.load_state_dict(checkpoint['model_state_dict'])
    optimizer.load_state_dict(checkpoint['optimizer_state_dict'])
    epoch = checkpoint['epoch']
    loss = checkpoint['loss']
    model.eval()
    env.rec("general", (epoch, loss, model(inputs)))
    # - or -
    model.train()
    env.rec("general resumed", train(model, optimizer, inputs, labels))
    env.rec("momentum", [optimizer.state[p]["momentum_buffer"] for p in model.parameters()])


def datasets_transforms(torch, env):
    """"Datasets & DataLoaders" and "Transforms": a custom Dataset over image files and an
    annotations CSV (read with csv, as pandas and torchvision are not installed: images are
    .npy uint8 arrays), ToTensor's scaling and the one-hot target_transform Lambda."""
    import csv
    import os
    Dataset = torch.utils.data.Dataset
    DataLoader = torch.utils.data.DataLoader

    img_dir = env.path("images")
    os.makedirs(img_dir, exist_ok=True)
    pixels = (env.rand(8, 1, 6, 6).numpy() * 255).astype(np.uint8)
    labels = env.randint(0, 10, (8,)).numpy()
    with open(env.path("annotations.csv"), "w", newline="") as f:
        for i in range(8):
            np.save(os.path.join(img_dir, f"img{i}.npy"), pixels[i])
            csv.writer(f).writerow([f"img{i}.npy", int(labels[i])])

    def read_image(path):
        return torch.from_numpy(np.load(path))

    class CustomImageDataset(Dataset):
        def __init__(self, annotations_file, img_dir, transform=None, target_transform=None):
            with open(annotations_file) as f:
                self.img_labels = [(name, np.int64(y)) for name, y in csv.reader(f)]
            self.img_dir = img_dir
            self.transform = transform
            self.target_transform = target_transform

        def __len__(self):
            return len(self.img_labels)

        def __getitem__(self, idx):
            img_path = os.path.join(self.img_dir, self.img_labels[idx][0])
            image = read_image(img_path)
            label = self.img_labels[idx][1]
            if self.transform:
                image = self.transform(image)
            if self.target_transform:
                label = self.target_transform(label)
            return image, label

    def ToTensor():
        return lambda img: img.to(torch.float32) / 255

    def Lambda(fn):
        return fn

    raw = CustomImageDataset(env.path("annotations.csv"), img_dir)
    image, label = raw[3]
    env.rec("raw item", (image, type(label).__name__, int(label)))
    train_features, train_labels = next(iter(DataLoader(raw, batch_size=4)))
    env.rec("raw batch", (train_features, train_labels))

    ds = CustomImageDataset(
        env.path("annotations.csv"), img_dir,
        transform=ToTensor(),
        target_transform=Lambda(lambda y: torch.zeros(10, dtype=torch.float).scatter_(
            0, torch.tensor(y), value=1)))
    env.rec("one-hot", ds[3][1])
    train_dataloader = DataLoader(ds, batch_size=4, shuffle=False)
    train_features, train_labels = next(iter(train_dataloader))
    env.rec("Feature batch shape", tuple(train_features.size()))
    env.rec("Labels batch", train_labels)

    model = env.init(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(36, 10)))
    loss_fn = torch.nn.CrossEntropyLoss()       # (probabilities as targets)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)

    def train_batch(X, y):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()

    train_batch = env.step(train_batch)
    for epoch in range(2):
        for batch, (X, y) in enumerate(train_dataloader):
            env.rec(f"loss {epoch} {batch}", train_batch(X, y))
    env.rec("params", list(model.parameters()))
