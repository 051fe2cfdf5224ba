"""tests/programs: whole PyTorch programs (the classic tutorials) run with torch and with
llgrad (`import llgrad as torch`), eagerly and with their training steps compiled. They
compare against PyTorch, so they are skipped when torch is not installed."""
import importlib.util

import pytest

if importlib.util.find_spec("torch") is None:
    def pytest_collection_modifyitems(items):
        skip = pytest.mark.skip(reason="the tutorial programs compare against torch, which "
                                       "is not installed")
        for item in items:
            if "tests/programs" in str(item.fspath).replace("\\", "/"):
                item.add_marker(skip)
