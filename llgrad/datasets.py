"""Small data sets generated on the spot (no download), for the demo and the examples."""
import numpy as np


def spirals(n_per_class=500, classes=3, noise=0.2, seed=0):
    """Interleaved 2-D spirals, one arm per class: (x float32 [n, 2], y int64 [n])."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, noise, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], 1))
        ys.append(np.full(n_per_class, c))
    x, y = np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)
    order = rng.permutation(len(y))
    return x[order], y[order]


def bars(n=1200, size=8, seed=0):
    """size x size images of a horizontal bar (class 0), a vertical bar (1) or a diagonal
    (2), at random places with noise: (x float32 [n, 1, size, size], y int64 [n])."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.3, (n, 1, size, size)).astype(np.float32)
    y = rng.integers(0, 3, n)
    for i in range(n):
        k = rng.integers(1, size - 1)
        if y[i] == 0:
            x[i, 0, k, :] += 1.5
        elif y[i] == 1:
            x[i, 0, :, k] += 1.5
        else:
            idx = np.arange(size)
            x[i, 0, idx, (idx + k) % size] += 1.5
    return x, y.astype(np.int64)


def split(x, y, train_fraction=0.8):
    n = int(len(y) * train_fraction)
    return (x[:n], y[:n]), (x[n:], y[n:])
