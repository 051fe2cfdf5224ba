"""The stacklevel at which a warnings.warn names the user's line: the first frame outside the
llgrad package (PyTorch's warnings come from C++ and name the caller's line, whatever
wrappers llgrad puts between, as out_args' do)."""
import functools
import os
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@functools.lru_cache(maxsize=4096)
def in_package(filename):
    """Whether code from filename is llgrad's own. Normalised: llgrad imported through a path
    with `..` in it (`sys.path.insert(0, os.path.join(here, ".."))`) names its frames so."""
    return os.path.abspath(filename).startswith(_PACKAGE)


def user_stacklevel():
    """The stacklevel, for a warnings.warn in the calling function, of the first frame not in
    llgrad's own files."""
    f, level = sys._getframe(1), 1
    while f is not None and in_package(f.f_code.co_filename):
        f, level = f.f_back, level + 1
    return level
