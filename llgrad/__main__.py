"""Command line: `python -m llgrad demo`."""
import sys


def demo():
    """Fit y = 3x - 1 + noise with a tiny MLP and eager autograd."""
    import time

    import llgrad as torch
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    y = 3 * x - 1 + 0.05 * torch.randn(64, 1)
    w1 = (torch.randn(1, 16) * 0.5).requires_grad_()
    b1 = torch.zeros(16, requires_grad=True)
    w2 = (torch.randn(16, 1) * 0.5).requires_grad_()
    b2 = torch.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]
    t0 = time.perf_counter()
    for step in range(301):
        pred = (x @ w1 + b1).tanh() @ w2 + b2
        loss = torch.nn.functional.mse_loss(pred, y)
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.sub_(0.1 * p.grad)
        if step % 50 == 0:
            print(f"step {step:3d}  loss {loss.item():.5f}")
    dt = (time.perf_counter() - t0) / 301 * 1e6
    print(f"eager step: {dt:.0f} us (forward + backward + update)")
    print(f"final loss {loss.item():.5f}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("demo",):
        print("usage: python -m llgrad demo", file=sys.stderr)
        return 2
    demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
