"""llgrad.multiprocessing (torch.multiprocessing: Python's multiprocessing, the sharing
strategy settings, spawn/start_processes with torch's errors) and llgrad.cuda's answers on
a machine without CUDA, as PyTorch without CUDA gives them."""
import os
import tempfile

import pytest

import llgrad


def _work(i, path):
    with open(os.path.join(path, f"{i}"), "w") as f:
        f.write(str(float(llgrad.ones(3).sum() * i)))


def _fail(i):
    if i == 1:
        raise ValueError("rank one failed")


def test_start_processes_runs_each_index():
    mp = llgrad.multiprocessing
    with tempfile.TemporaryDirectory() as d:
        assert mp.start_processes(_work, args=(d,), nprocs=2, start_method="fork") is None
        assert sorted(os.listdir(d)) == ["0", "1"]
        assert open(os.path.join(d, "1")).read() == "3.0"


def test_a_failing_process_raises_its_traceback():
    mp = llgrad.multiprocessing
    with pytest.raises(mp.ProcessRaisedException, match="rank one failed") as e:
        mp.start_processes(_fail, nprocs=2, start_method="fork")
    assert e.value.error_index == 1


def test_sharing_strategy_and_reexports():
    mp = llgrad.multiprocessing
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy("file_descriptor")
    assert mp.cpu_count() >= 1 and callable(mp.set_start_method) and mp.Queue


def test_cuda_answers_as_torch_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("torch has CUDA here")
    for name in ("empty_cache", "is_initialized", "is_bf16_supported", "memory_allocated",
                 "max_memory_allocated", "memory_reserved", "seed", "seed_all"):
        assert getattr(llgrad.cuda, name)() == getattr(torch.cuda, name)(), name
    for name in ("synchronize", "current_device", "get_device_name", "mem_get_info",
                 "initial_seed"):
        with pytest.raises(AssertionError, match="not compiled with CUDA"):
            getattr(torch.cuda, name)()
        with pytest.raises(AssertionError, match="not compiled with CUDA"):
            getattr(llgrad.cuda, name)()
