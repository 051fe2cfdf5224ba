"""The examples behind README's "Seeing what compile did", to run again:

    LLGRAD_LOG=recompiles,graph_breaks,compile python docs/seeing_compile.py log
    python docs/seeing_compile.py profile
    python -m llgrad dump docs/seeing_compile.py:mlp_loss \\
        --args "f32[16,2] f32[2,8] f32[8] f32[8,1] f32[16,1]" --svg docs/mlp_loss.svg
"""
import sys

import llgrad
import llgrad.nn as nn


def mlp_loss(x, w1, b1, w2, y):
    h = (x @ w1 + b1).tanh()
    return (h @ w2 - y).pow(2).mean()


def train_step(model, opt, loss_fn, x, y):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def checked_step(model, opt, loss_fn, x, y):
    loss = train_step(model, opt, loss_fn, x, y)
    if loss.numpy() > 10:           # a graph break: NumPy reads the traced loss
        print("diverging")
    return loss


def main(what):
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 3))
    opt = llgrad.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x, y = llgrad.randn(1000, 2), (llgrad.rand(1000) * 3).long()
    step = llgrad.compile(train_step)
    if what == "log":
        for start in range(0, 1000, 128):       # the last batch has 104 rows
            step(model, opt, loss_fn, x[start:start + 128], y[start:start + 128])
        llgrad.compile(checked_step)(model, opt, loss_fn, x[:128], y[:128])
    else:
        xb, yb = x[:128], y[:128]
        for _ in range(3):
            step(model, opt, loss_fn, xb, yb)
        with llgrad.profile() as p:
            for _ in range(100):
                step(model, opt, loss_fn, xb, yb)
        print(p.table(row_limit=12))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "log")
