"""Session-wide test settings.

Compiled kernels go to a disk cache private to this test session (unless the developer
points LLGRAD_CACHE_DIR somewhere on purpose): tests never write to the user's cache, and
tests that study the cache itself set their own directory."""
import os
import tempfile

if not os.environ.get("LLGRAD_CACHE_DIR"):
    os.environ["LLGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="llgrad-test-cache-")
