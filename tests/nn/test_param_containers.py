"""nn.ParameterList, nn.ParameterDict and nn.Buffer: registration names, state_dict keys,
reprs and errors as torch's (when installed), and a model holding them trained eagerly and
compiled to the same numbers."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn

RNG = np.random.default_rng(5)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)


def _torch():
    return pytest.importorskip("torch")


def _model(lib):
    tnn = lib.nn

    class M(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ws = tnn.ParameterList([tnn.Parameter(lib.tensor(A)), lib.tensor(A.T.copy())])
            self.bs = tnn.ParameterDict({"z": lib.tensor(B), "a": tnn.Parameter(lib.tensor(B[:3]))})
            self.scale = tnn.Buffer(lib.tensor([2.0]))
            self.tmp = tnn.Buffer(lib.ones(1), persistent=False)

        def forward(self, x):
            h = (x @ self.ws[0] + self.bs["z"]).tanh()
            return (h @ self.ws[1] + self.bs["a"]) * self.scale
    return M()


def test_names_state_dict_and_repr_match_torch():
    torch = _torch()
    ours, theirs = _model(llgrad), _model(torch)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert repr(ours).replace("llgrad", "torch") == repr(theirs)
    assert len(ours.ws) == 2 and list(ours.bs) == list(theirs.bs) == ["a", "z"]
    ours.load_state_dict({k: llgrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})


def test_list_and_dict_behave_as_torch():
    torch = _torch()
    for lib in (llgrad, torch):
        pl = lib.nn.ParameterList()
        pl.append(lib.zeros(2)).extend([lib.ones(3), "note"])
        assert isinstance(pl[0], lib.nn.Parameter) and pl[2] == "note" and len(pl) == 3
        assert len(pl[1:]) == 2 and isinstance(pl[-2], lib.nn.Parameter)
        pl[0] = lib.full((2,), 5.0)
        assert pl[0].tolist() == [5.0, 5.0] and isinstance(pl[0], lib.nn.Parameter)
        with pytest.raises(IndexError, match="index 3 is out of range"):
            pl[3]
        with pytest.raises(TypeError, match="ParameterList.extend should be called with an"):
            pl.extend(lib.zeros(2))
        with pytest.raises(RuntimeError, match="ParameterList should not be called."):
            pl(1)
        pd = lib.nn.ParameterDict([("x", lib.zeros(1)), ("y", lib.ones(1))])
        assert list(pd.keys()) == ["x", "y"] and "x" in pd
        assert pd.pop("x").tolist() == [0.0] and list(pd) == ["y"]
        pd.setdefault("w", lib.ones(2))
        merged = pd | lib.nn.ParameterDict({"q": lib.zeros(1)})
        assert list(merged) == ["y", "w", "q"] and list(pd) == ["y", "w"]
        assert pd.popitem()[0] == "w" and pd.get("nope", 7) == 7
        with pytest.raises(TypeError, match="cannot be used as a key as it is not a string"):
            pd[1]
        with pytest.raises(ValueError, match="has length 3; 2 is required"):
            pd.update([("a", lib.zeros(1), 3)])


def test_buffer_registration():
    m = nn.Module()
    m.b = nn.Buffer(llgrad.ones(2, requires_grad=True))
    m.c = nn.Buffer(llgrad.zeros(1), persistent=False)
    assert [n for n, _ in m.named_buffers()] == ["b", "c"] and list(m.state_dict()) == ["b"]
    assert m.b.requires_grad and m.b.grad_fn is None


def test_compiled_training_equals_eager():
    x = llgrad.tensor(RNG.standard_normal((6, 3)).astype(np.float32))
    y = llgrad.tensor(RNG.standard_normal((6, 3)).astype(np.float32))

    def run(compiled):
        model = _model(llgrad)
        opt = llgrad.optim.Adam(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        fn = llgrad.compile(step) if compiled else step
        losses = [fn().item() for _ in range(6)]
        return losses, [p.detach().numpy().copy() for p in model.parameters()]
    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
