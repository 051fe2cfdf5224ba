"""The stacklevel at which a warnings.warn names the user's line: the first frame outside the
llgrad package (PyTorch's warnings come from C++ and name the caller's line, whatever
wrappers llgrad puts between, as out_args' do)."""
import os
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel():
    """The stacklevel, for a warnings.warn in the calling function, of the first frame not in
    llgrad's own files."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f, level = f.f_back, level + 1
    return level
