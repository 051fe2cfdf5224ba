"""Sweep 16 (D), part 1: programs of the pytorch/examples repository at small sizes, random
data in place of datasets: time_sequence_prediction (two LSTMCells in float64, LBFGS with a
closure, future prediction), mnist_forward_forward (layer-local Adam, goodness of positive
and negative overlays) and super_resolution (orthogonal init, pixel_shuffle, PSNR).
See tutorial_harness.py."""
import numpy as np
import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def time_sequence(torch, env):
    """time_sequence_prediction/train.py: sine waves, LSTMCell x2, LBFGS(lr=0.8)."""
    nn, optim = torch.nn, torch.optim
    T, L, N = 20, 16, 6
    x = np.empty((N, L), np.int64)
    x[:] = np.arange(L) + np.array([3, 11, 7, 19, 2, 5])[:, None]
    data = np.sin(x / 1.0 / T).astype("float64")
    inp, target = torch.from_numpy(data[2:, :-1]), torch.from_numpy(data[2:, 1:])
    test_inp, test_target = torch.from_numpy(data[:2, :-1]), torch.from_numpy(data[:2, 1:])

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, 12)
            self.lstm2 = nn.LSTMCell(12, 12)
            self.linear = nn.Linear(12, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            h_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for i in range(future):
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            return torch.cat(outputs, dim=1)

    seq = Sequence()
    seq.double()
    env.init(seq)
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)

    def closure():
        optimizer.zero_grad()
        out = seq(inp)
        loss = criterion(out, target)
        loss.backward()
        return loss

    closure = env.step(closure)
    for i in range(2):
        env.rec(f"step loss {i}", optimizer.step(closure))
        with torch.no_grad():
            future = 5
            pred = seq(test_inp, future=future)
            loss = criterion(pred[:, :-future], test_target)
            env.rec(f"test loss {i}", loss)
            env.rec(f"pred {i}", pred.detach().numpy().shape)
        env.rec(f"params {i}", [p for p in seq.parameters()])


def test_time_sequence_prediction():
    run_tutorial(time_sequence, rtol=1e-7, atol=1e-9)


def forward_forward(torch, env):
    """mnist_forward_forward/main.py: each Layer trains itself on the goodness
    (mean squared activation) of positive data against negative data."""
    nn, optim = torch.nn, torch.optim

    def overlay_y_on_x(x, y):
        x_ = x.clone()
        x_[:, :10] *= 0.0
        x_[range(x.shape[0]), y] = x.max()
        return x_

    class Layer(nn.Linear):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__(in_features, out_features, bias)
            self.relu = torch.nn.ReLU()
            self.opt = optim.Adam(self.parameters(), lr=0.03)
            self.threshold = 2.0
            self.step = env.step(self.train_step)

        def forward(self, x):
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train_step(self, x_pos, x_neg):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log(1 + torch.exp(torch.cat([
                -g_pos + self.threshold, g_neg - self.threshold]))).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return loss

        def train(self, x_pos, x_neg, epochs=4):
            for i in range(epochs):
                loss = self.step(x_pos, x_neg)
                env.rec("layer loss", loss)
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    class Net(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = [env.init(Layer(dims[d], dims[d + 1])) for d in range(len(dims) - 1)]

        def predict(self, x):
            goodness_per_label = []
            for label in range(10):
                h = overlay_y_on_x(x, label)
                goodness = []
                for layer in self.layers:
                    h = layer(h)
                    goodness += [h.pow(2).mean(1)]
                goodness_per_label += [sum(goodness).unsqueeze(1)]
            goodness_per_label = torch.cat(goodness_per_label, 1)
            return goodness_per_label.argmax(1)

        def train(self, x_pos, x_neg):
            h_pos, h_neg = x_pos, x_neg
            for layer in self.layers:
                h_pos, h_neg = layer.train(h_pos, h_neg)

    x, y = env.rand(16, 40), env.randint(0, 10, (16,))
    net = Net([40, 24, 24])
    x_pos = overlay_y_on_x(x, y)
    rnd = torch.tensor(np.random.default_rng(3).permutation(16))
    x_neg = overlay_y_on_x(x, y[rnd])
    env.rec("x_pos", x_pos)
    net.train(x_pos, x_neg)
    env.rec("train error", 1.0 - net.predict(x).eq(y).float().mean().item())
    env.rec("weights", [p for layer in net.layers for p in layer.parameters()])


def test_mnist_forward_forward():
    run_tutorial(forward_forward, rtol=1e-5, atol=1e-6)


def super_resolution(torch, env):
    """super_resolution/model.py and main.py: upscale 3x by a convolution to r^2 channels
    and pixel_shuffle; MSE and PSNR."""
    nn, optim, init = torch.nn, torch.optim, torch.nn.init

    class Net(nn.Module):
        def __init__(self, upscale_factor):
            super().__init__()
            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 8, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(8, 8, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(8, 4, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(4, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
            self._initialize_weights()

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            x = self.pixel_shuffle(self.conv4(x))
            return x

        def _initialize_weights(self):
            init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv4.weight)

    model = env.init(Net(upscale_factor=3))
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    low, high = env.rand(4, 1, 6, 6), env.rand(4, 1, 18, 18)

    def train(input, target):
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        loss.backward()
        optimizer.step()
        return loss

    train = env.step(train)
    for epoch in range(3):
        loss = train(low, high)
        env.rec(f"loss {epoch}", loss)
        with torch.no_grad():
            mse = criterion(model(low), high)
            psnr = 10 * np.log10(1 / mse.item())
        env.rec(f"psnr {epoch}", float(psnr))
    ps = torch.nn.functional.pixel_shuffle(env.randn(2, 18, 3, 4), 3)
    env.rec("pixel_shuffle", ps)
    env.rec("pixel_unshuffle", torch.nn.functional.pixel_unshuffle(ps, 3))
    env.rec("grads", [p.grad for p in model.parameters()])


def test_super_resolution():
    run_tutorial(super_resolution, rtol=1e-5, atol=1e-6)
