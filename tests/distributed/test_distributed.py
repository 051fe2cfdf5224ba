"""llgrad.distributed, DistributedDataParallel and DistributedSampler on 2 MPI processes
(the worker scripts beside this file; see conftest.py)."""
import pytest

from mpi_launch import checks


def _expect_both(ok, names):
    missing = [n for n in names if ok.get(n) != {0, 1}]
    assert not missing, f"checks not reported OK by both ranks: {missing}"


def test_collectives_match_numpy(mpirun):
    ok = checks(mpirun("mpi_collectives.py"))
    _expect_both(ok, ["all_reduce SUM", "all_reduce AVG", "all_reduce MAX", "all_reduce MIN",
                      "all_reduce PRODUCT", "all_reduce int64 BXOR",
                      "all_reduce of a non-contiguous view", "async all_reduce",
                      "broadcast from 0", "broadcast from 1", "async broadcast", "all_gather",
                      "async all_gather int64", "all_gather_into_tensor",
                      "reduce_scatter SUM", "reduce_scatter MAX", "async reduce_scatter AVG",
                      "reduce_scatter_tensor", "barrier", "async barrier", "init twice",
                      "destroyed"])


def test_distributed_sampler_shards(mpirun):
    ok = checks(mpirun("mpi_collectives.py"))
    names = [n for n in ok if n.startswith("DistributedSampler")]
    assert len(names) == 4
    _expect_both(ok, names)


@pytest.fixture
def ddp_run(mpirun):
    return checks(mpirun("mpi_ddp.py"))


def test_ddp_equals_global_batch(ddp_run):
    names = [n for n in ddp_run if n.startswith("20 DDP steps == global batch")]
    assert len(names) == 6
    _expect_both(ddp_run, names + ["parameters broadcast from rank 0", "several buckets",
                                   "buckets in reverse registration order",
                                   "Adam, one bucket"])


def test_ddp_no_sync(ddp_run):
    _expect_both(ddp_run, ["no_sync leaves local gradients",
                           "no_sync accumulation then sync == mean of the ranks' sums"])


def test_ddp_compiled_step_equals_eager(ddp_run):
    names = [n for n in ddp_run if n.startswith("compiled DDP step == eager")]
    assert len(names) == 6
    _expect_both(ddp_run, names + [f"compiled step {k}: loss" for k in range(6)] +
                 ["compiled DDP forward, backward outside: averaged gradients"])


def test_ddp_of_a_compiled_model(ddp_run):
    names = [n for n in ddp_run if n.startswith("DDP(compiled model) == DDP(model)")]
    assert len(names) == 6
    _expect_both(ddp_run, names + ["DDP(llgrad.compile(model)) runs compiled graphs"])


def test_ddp_buffers_and_unused_parameters(ddp_run):
    _expect_both(ddp_run, ["buffers broadcast from rank 0 at forward",
                           "find_unused_parameters: backward completes, unused .grad stays "
                           "None", "unused parameters without find_unused_parameters raise"])


def test_a_rank_that_raises_ends_the_job(mpirun):
    proc = mpirun("mpi_failure.py", args=("raise",), timeout=40)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert "rank 1 failed on purpose" in text and "aborting the job" in text, text
    assert not any("finished" in ln for r in (0, 1) for ln in proc.reports[r]), text


@pytest.mark.slow      # (~4.5 s each: waits out a timeout)
@pytest.mark.parametrize("mode", ["skip", "ddp"])
def test_a_missing_rank_times_out_with_a_clear_error(mpirun, mode):
    proc = mpirun("mpi_failure.py", args=(mode,), timeout=40)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert "timed out after 3 s on rank 0 of 2" in text, text
    assert not any("finished" in ln for r in (0, 1) for ln in proc.reports[r]), text


def test_example_ddp_script(mpirun):
    proc = mpirun("../../examples/ddp.py", args=("--epochs", "2"), timeout=60)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    assert "2 process(es) x 64 samples per step" in text, text
    assert "parameters identical on all 2 ranks: True" in text, text
