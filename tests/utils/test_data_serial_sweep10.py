"""StackDataset.__getitems__ (the batched read the DataLoader uses), the first line of the
weights-only load error and the warning for more DataLoader workers than CPUs, against
torch."""
import io
import os
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")


def _stack_case(lib):
    D = lib.utils.data

    class Batched(D.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return i

        def __getitems__(self, idx):
            return [10 * i for i in idx]

    class Short(Batched):
        def __getitems__(self, idx):
            return [1]

    s = D.StackDataset(lib.arange(4), Batched())
    s2 = D.StackDataset(a=Batched(), b=[5, 6, 7, 8])
    try:
        D.StackDataset(Batched(), Short()).__getitems__([0, 1])
        err = None
    except ValueError as e:
        err = str(e)
    batches = [[x.tolist() for x in b] for b in D.DataLoader(s, batch_size=2)]
    dict_batches = [{k: v.tolist() for k, v in b.items()} for b in D.DataLoader(s2, batch_size=3)]
    return ([(int(a), b) for a, b in s.__getitems__([0, 3])], s2.__getitems__([1, 2]), batches,
            dict_batches, err, s.__getitems__([]))


def test_stack_dataset_getitems():
    assert _stack_case(llgrad) == _stack_case(torch)


def test_weights_only_error_first_line():
    lines = []
    for lib in (torch, llgrad):
        buf = io.BytesIO()
        lib.save(lib.nn.Linear(2, 2), buf)
        buf.seek(0)
        with pytest.raises(Exception) as e:
            lib.load(buf)
        lines.append((type(e.value).__name__, str(e.value).splitlines()[0]))
    assert lines[1] == lines[0]


def test_too_many_workers_warn_as_torch():
    n = len(os.sched_getaffinity(0)) + 3 if hasattr(os, "sched_getaffinity") else 64
    got = []
    for lib in (torch, llgrad):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            dl = lib.utils.data.DataLoader(lib.arange(4.0), num_workers=n, batch_size=2)
            at_init = len(w)
            batches = [b.tolist() for b in dl]
        got.append((at_init, [(x.category, str(x.message)) for x in w], batches))
    assert got[1] == got[0]
