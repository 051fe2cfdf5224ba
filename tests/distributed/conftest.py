"""The `mpirun` fixture of tests/distributed: launch(script) of mpi_launch.py, or a skip
when mpi4py or mpiexec is missing."""
import pytest

from mpi_launch import launch, skip_reason


@pytest.fixture
def mpirun():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    return launch
