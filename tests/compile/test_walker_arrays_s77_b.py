"""A compiled method whose object's other methods name a small NumPy array (a global of
label statistics beside the model; in the mnist_forward_forward program, a Layer's own
train() loop closing over the script's state) took the full guard walk on every call: the
guard walker (guard_walker.py) gave up at any NumPy array, so each call cost ~1 ms of
guards.collect instead of the walker's ~0.05 ms. A small array is now walked as collect walks
it: an input, guarded by its contents."""
import numpy as np

import llgrad

_STATS = {"means": np.zeros((4, 6), dtype=np.float32)}
_SCALE = np.array([2.0, 0.5, 1.0, 1.0], dtype=np.float32)


class _Net(llgrad.nn.Module):
    def __init__(self, read_scale):
        super().__init__()
        self.fc = llgrad.nn.Linear(6, 4)
        self.opt = llgrad.optim.SGD(self.parameters(), lr=0.1)
        self.read_scale = read_scale

    def describe(self):             # (never called by the step: only followed by the walk)
        return _STATS["means"].sum()

    def train_step(self, x, y):
        self.opt.zero_grad()
        out = self.fc(x)
        if self.read_scale:         # (the array read as a tensor: the trace's input)
            out = out * llgrad.from_numpy(_SCALE)
        loss = llgrad.nn.functional.cross_entropy(out, y)
        loss.backward()
        self.opt.step()
        return loss


def _run(compiled, read_scale, calls=6):
    _SCALE[:] = [2.0, 0.5, 1.0, 1.0]
    llgrad.manual_seed(0)
    net = _Net(read_scale)
    rng = np.random.default_rng(0)
    x = llgrad.tensor(rng.standard_normal((8, 6)).astype(np.float32))
    y = llgrad.tensor(rng.integers(0, 4, 8))
    step = llgrad.compile(net.train_step, backend="interpret") if compiled else net.train_step
    losses = []
    for i in range(calls):
        if i == 4 and read_scale:
            _SCALE[0] = 3.0         # (written in place between calls: a new guard key)
        losses.append(step(x, y).item())
    return losses, net.fc.weight.detach().numpy().copy(), step


def test_step_beside_a_numpy_array_takes_the_walker():
    losses, w, step = _run(True, False)
    e_losses, e_w, _ = _run(False, False)
    np.testing.assert_allclose(losses, e_losses, rtol=1e-6)
    np.testing.assert_allclose(w, e_w, rtol=1e-6)
    assert step._walkers, "every call took the full guard walk"
    assert step.n_traces == 1 and not step.graph_breaks


def test_array_read_as_a_tensor_and_written_between_calls():
    losses, w, step = _run(True, True)
    e_losses, e_w, _ = _run(False, True)
    np.testing.assert_allclose(losses, e_losses, rtol=1e-6)
    np.testing.assert_allclose(w, e_w, rtol=1e-6)
    assert step._walkers and not step.graph_breaks
