"""The fuzz tests' shared setting."""
import os

import pytest


@pytest.fixture(scope="module")
def throwaway_kernels():
    """The backend each test asks for (none from the environment), no dumps, and no disk
    cache for the kernels: a long run compiles thousands of graphs nobody needs again."""
    keys = ("LLGRAD_BACKEND", "LLGRAD_DUMP", "LLGRAD_CACHE_DIR")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.pop("LLGRAD_BACKEND", None)
    os.environ.pop("LLGRAD_DUMP", None)
    os.environ["LLGRAD_CACHE_DIR"] = "0"
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
