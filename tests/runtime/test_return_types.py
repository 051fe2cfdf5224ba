"""The named tuples ops return are llgrad.return_types.<name> as torch's are torch's: same
names and fields, printed alike, and pickle finds them (a saved torch.max(x, 1) loads)."""
import pickle

import pytest

import llgrad

torch = pytest.importorskip("torch")

CALLS = {
    "max": lambda L, x: L.max(x, 0), "min": lambda L, x: L.min(x, 1),
    "sort": lambda L, x: L.sort(x), "topk": lambda L, x: L.topk(x, 2),
    "kthvalue": lambda L, x: L.kthvalue(x, 2), "median": lambda L, x: L.median(x, 0),
    "mode": lambda L, x: L.mode(x, 0), "cummax": lambda L, x: L.cummax(x, 0),
    "aminmax": lambda L, x: L.aminmax(x), "frexp": lambda L, x: L.frexp(x),
    "histogram": lambda L, x: L.histogram(x, 3), "linalg_qr": lambda L, x: L.linalg.qr(x),
    "linalg_svd": lambda L, x: L.linalg.svd(x),
    "linalg_slogdet": lambda L, x: L.linalg.slogdet(x[:, :3]),
    "linalg_lu_factor": lambda L, x: L.linalg.lu_factor(x[:, :3]),
}


@pytest.mark.parametrize("name", CALLS)
def test_named_as_torchs_and_pickled(name):
    x = [[1., 5., 2., 4.], [3., 0., 6., 2.], [7., 1., 1., 9.]]
    mine, theirs = CALLS[name](llgrad, llgrad.tensor(x)), CALLS[name](torch, torch.tensor(x))
    assert type(mine).__name__ == type(theirs).__name__ == name
    assert len(mine) == len(theirs) and all(hasattr(theirs, f) for f in mine._fields)
    assert isinstance(mine, getattr(llgrad.return_types, name))
    back = pickle.loads(pickle.dumps(mine))
    assert type(back) is type(mine)
    assert repr(mine).split("(")[0] == repr(theirs).split("(")[0].replace("torch", "llgrad")
