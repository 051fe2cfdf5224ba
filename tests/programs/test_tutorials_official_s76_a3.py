"""Batch s76 (a3): official pytorch.org tutorials (see test_tutorials_official_s76_a.py):
the Tensors tutorials (out=, in-place, the NumPy bridge, printing, broadcasting) and Learn the
Basics (a Dataset with a one-hot target_transform by scatter_, DataLoader, the model's
printed parameters, train_loop / test_loop)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def tensors_tutorial(torch, env):
    data = [[1, 2], [3, 4]]
    x_data = torch.tensor(data)
    np_array = np.array(data)
    x_np = torch.from_numpy(np_array)
    x_ones = torch.ones_like(x_data)
    env.rec("ones", f"Ones Tensor: \n {x_ones} \n")
    x_rand = torch.rand_like(x_data, dtype=torch.float)
    env.rec("rand", (x_rand.dtype, tuple(x_rand.shape), x_np.dtype))
    shape = (2, 3,)
    env.rec("zeros", f"Zeros Tensor: \n {torch.zeros(shape)}")
    tensor = torch.rand(3, 4)
    env.rec("attrs", f"Shape of tensor: {list(tensor.shape)}\nDatatype of tensor: "
                     f"{str(tensor.dtype).split('.')[1]}\nDevice tensor is stored on: "
                     f"{tensor.device}")
    tensor = torch.ones(4, 4)
    tensor[:, 1] = 0
    env.rec("rows", f"First row: {tensor[0]}\nFirst column: {tensor[:, 0]}\n"
                    f"Last column: {tensor[..., -1]}\n{tensor}")
    t1 = torch.cat([tensor, tensor, tensor], dim=1)
    env.rec("cat", t1)

    def arithmetic(tensor):
        y1 = tensor @ tensor.T
        y2 = tensor.matmul(tensor.T)
        y3 = torch.rand_like(y1)
        torch.matmul(tensor, tensor.T, out=y3)
        z1 = tensor * tensor
        z2 = tensor.mul(tensor)
        z3 = torch.rand_like(tensor)
        torch.mul(tensor, tensor, out=z3)
        agg = tensor.sum()
        tensor.add_(5)
        return y1, y2, y3, z1, z2, z3, agg

    step = env.step(arithmetic)
    w = env.rand(4, 4)
    for it in range(2):
        y1, y2, y3, z1, z2, z3, agg = step(w)
        env.rec(f"arith {it}", (y1, y2, y3, z1, z2, z3))
        agg_item = agg.item()
        env.rec(f"agg {it}", (agg_item, type(agg_item).__name__))
    env.rec("add_", f"{w} \n")

    t = torch.ones(5)
    n = t.numpy()
    t.add_(1)
    env.rec("bridge 1", f"t: {t}\nn: {n}")
    n = np.ones(5)
    t = torch.from_numpy(n)
    np.add(n, 1, out=n)
    env.rec("bridge 2", f"t: {t}\nn: {n}".replace(torch.__name__, "torch"))

    # (Introduction to PyTorch Tensors, the video series)
    ones = torch.zeros(2, 2) + 1
    twos = torch.ones(2, 2) * 2
    threes = (torch.ones(2, 2) * 7 - 1) / 2
    fours = twos ** 2
    sqrt2s = twos ** 0.5
    powers2 = twos ** torch.tensor([[1, 2], [3, 4]])
    env.rec("arith", (ones, threes, fours, sqrt2s, powers2, str(powers2)))
    a = torch.ones(4, 3, 2)
    b = a * env.rand(3, 2)
    c = a * env.rand(3, 1)
    d = a * env.rand(1, 2)
    env.rec("broadcast", (b, c, d))
    a = env.rand(2, 4) * 2 - 1
    env.rec("common", (torch.abs(a), torch.ceil(a), torch.floor(a), torch.clamp(a, -0.5, 0.5)))
    angles = torch.tensor([0, math.pi / 4, math.pi / 2, 3 * math.pi / 4])
    sines = torch.sin(angles)
    env.rec("trig", (sines, torch.asin(sines)))
    b = torch.tensor([1, 5, 11])
    c = torch.tensor([2, 7, 10])
    env.rec("xor", torch.bitwise_xor(b, c))
    d = torch.tensor([[1., 2.], [3., 4.]])
    e = torch.ones(1, 2)
    env.rec("eq", torch.eq(d, e))
    env.rec("reductions", (torch.max(d), torch.max(d).item(), torch.mean(d), torch.std(d),
                           torch.prod(d), torch.unique(torch.tensor([1, 2, 1, 2, 1, 2]))))
    v1 = torch.tensor([1., 0., 0.])
    v2 = torch.tensor([0., 1., 0.])
    m1 = env.rand(2, 2)
    m2 = torch.tensor([[3., 0.], [0., 3.]])
    m3 = torch.linalg.matmul(m1, m2)
    env.rec("linalg", (torch.linalg.cross(v2, v1), m3, torch.linalg.svd(m3).S))
    a = torch.tensor([0, math.pi / 4, math.pi / 2, 3 * math.pi / 4])
    a.sin_()
    b = torch.ones(2, 2)
    b.add_(env.rand(2, 2))
    env.rec("in-place", (a, b))
    a, b = env.rand(2, 2), env.rand(2, 2)
    c = torch.zeros(2, 2)
    old_id = id(c)
    d = torch.matmul(a, b, out=c)
    env.rec("out=", (c, id(c) == old_id, d is c))
    torch.rand(2, 2, out=c)
    env.rec("rand out", (id(c) == old_id, tuple(c.shape)))
    a = torch.ones(2, 2)
    b = a
    a[0][1] = 561
    c = a.clone()
    a[0][0] = 7
    env.rec("copy", (b, c, b is a, torch.eq(a, c)))
    a = env.rand(2, 2).requires_grad_()
    env.rec("clone grad", (a.clone().requires_grad, a.detach().clone().requires_grad))
    a = torch.rand(3, 22, 22)
    env.rec("shapes", (a.unsqueeze(0).shape, torch.rand(1, 20).squeeze(0).shape,
                       torch.rand(2, 2).squeeze(0).shape, torch.rand(3).unsqueeze(1).shape))
    batch_me = torch.rand(3, 22, 22)
    batch_me.unsqueeze_(0)
    output3d = env.rand(6, 4, 4)
    env.rec("reshape", (batch_me.shape, output3d.reshape(6 * 4 * 4),
                        torch.reshape(output3d, (6 * 4 * 4,)).shape))
    numpy_array = np.ones((2, 3))
    pytorch_tensor = torch.from_numpy(numpy_array)
    numpy_array[1, 1] = 23
    pytorch_rand = env.rand(2, 3)
    numpy_rand = pytorch_rand.numpy()
    pytorch_rand[1, 1] = 17
    env.rec("numpy", (pytorch_tensor, numpy_rand,
                      str(pytorch_tensor).replace(torch.__name__, "torch")))


def learn_the_basics(torch, env):
    nn = torch.nn
    from_torch = torch.utils.data
    labels_map = {i: name for i, name in enumerate(
        ["T-Shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
         "Bag", "Ankle Boot"])}
    raw_images = env.randint(0, 256, (20, 1, 6, 6))
    raw_labels = [env.choice(10) for _ in range(20)]

    class CustomImageDataset(from_torch.Dataset):
        def __init__(self, images, labels, transform=None, target_transform=None):
            self.img_labels = labels
            self.images = images
            self.transform = transform
            self.target_transform = target_transform

        def __len__(self):
            return len(self.img_labels)

        def __getitem__(self, idx):
            image = self.images[idx]
            label = self.img_labels[idx]
            if self.transform:
                image = self.transform(image)
            if self.target_transform:
                label = self.target_transform(label)
            return image, label

    ds = CustomImageDataset(
        raw_images, raw_labels, transform=lambda img: img.to(torch.float32) / 255,
        target_transform=lambda y: torch.zeros(10, dtype=torch.float).scatter_(
            0, torch.tensor(y), value=1))
    img, label = ds[3]
    env.rec("sample", (img.dtype, tuple(img.shape), label, labels_map[int(label.argmax())]))
    train_dataloader = from_torch.DataLoader(CustomImageDataset(
        raw_images[:12], raw_labels[:12], ds.transform, ds.target_transform), batch_size=4)
    test_dataloader = from_torch.DataLoader(CustomImageDataset(
        raw_images[12:], raw_labels[12:], ds.transform, ds.target_transform), batch_size=4)
    train_features, train_labels = next(iter(train_dataloader))
    env.rec("batch", f"Feature batch shape: {list(train_features.size())}\n"
                     f"Labels batch shape: {list(train_labels.size())}")

    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(6 * 6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                nn.Linear(16, 10))

        def forward(self, x):
            x = self.flatten(x)
            logits = self.linear_relu_stack(x)
            return logits

    model = env.init(NeuralNetwork())
    logits = model(train_features)
    pred_probab = nn.Softmax(dim=1)(logits)
    env.rec("pred", f"Predicted class: {pred_probab.argmax(1)}")
    for name, param in list(model.named_parameters())[:2]:
        env.rec(f"layer {name}", f"Layer: {name} | Size: {list(param.size())} | "
                                 f"Values : {param[:2]} \n")
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)

    def train_batch(X, y):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    step = env.step(train_batch)

    def train_loop(dataloader, model, loss_fn, optimizer):
        size = len(dataloader.dataset)
        model.train()
        for batch, (X, y) in enumerate(dataloader):
            loss = step(X, y)
            loss, current = loss.item(), batch * 4 + len(X)
            env.rec(f"train {t} {batch}", f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")

    def test_loop(dataloader, model, loss_fn):
        model.eval()
        size = len(dataloader.dataset)
        num_batches = len(dataloader)
        test_loss, correct = 0, 0
        with torch.no_grad():
            for X, y in dataloader:
                pred = model(X)
                test_loss += loss_fn(pred, y).item()
                correct += (pred.argmax(1) == y.argmax(1)).type(torch.float).sum().item()
        test_loss /= num_batches
        correct /= size
        env.rec(f"test {t}", f"Test Error: \n Accuracy: {(100*correct):>0.1f}%, "
                             f"Avg loss: {test_loss:>8f} \n")

    for t in range(3):
        train_loop(train_dataloader, model, loss_fn, optimizer)
        test_loop(test_dataloader, model, loss_fn)
    env.rec("params", dict(model.named_parameters()))


PROGRAMS = {f.__name__: f for f in (tensors_tutorial, learn_the_basics)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
