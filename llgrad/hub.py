"""llgrad.hub: the parts of torch.hub that programs use offline. `tqdm` is the tqdm package
when it is installed and otherwise a stand-in with PyTorch's: a byte counter that takes
`total`, `update`, `set_description`, `write` and `close` (and, as PyTorch's, cannot wrap
an iterable). Files download as PyTorch downloads them (`download_url_to_file`,
`load_state_dict_from_url`: a checkpoint by URL, cached under get_dir()/checkpoints); entry
points of a hubconf.py (load, list, help: hub_entrypoints.py) from a local directory or a
repository already in the hub cache (llgrad does not download repositories)."""
import errno
import hashlib
import os
import re
import shutil
import sys
import tempfile
import uuid
import warnings
import zipfile
from urllib.parse import urlparse

from .hub_entrypoints import entry_doc, entry_points, load_local, repo_dir
from .serialization import load as _load

__all__ = ["tqdm", "get_dir", "set_dir", "download_url_to_file", "load_state_dict_from_url",
           "load", "list", "help"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")   # (a file name's sha256 prefix: name-<hash>.ext)
READ_DATA_CHUNK = 128 * 1024

_hub_dir = None


class _ByteProgress:
    """A progress counter written to stderr (torch.hub's stand-in when tqdm is missing)."""

    def __init__(self, total=None, disable=False, unit=None, *args, **kwargs):
        self.total, self.disable, self.n = total, disable, 0

    def update(self, n):
        """Count n more units and print the progress."""
        if self.disable:
            return
        self.n += n
        if self.total is None:
            sys.stderr.write(f"\r{self.n:.1f} bytes")
        else:
            sys.stderr.write(f"\r{100 * self.n / float(self.total):.1f}%")
        sys.stderr.flush()

    def set_description(self, *args, **kwargs):
        """Ignored."""

    def write(self, s):
        """Print s on its own line."""
        sys.stderr.write(f"{s}\n")

    def close(self):
        """Stop printing."""
        self.disable = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if not self.disable:
            sys.stderr.write("\n")


try:
    from tqdm import tqdm
except ImportError:
    tqdm = _ByteProgress


def get_dir():
    """The hub cache directory: set_dir's, else $TORCH_HOME/hub, else
    $XDG_CACHE_HOME/torch/hub (~/.cache/torch/hub)."""
    if _hub_dir is not None:
        return _hub_dir
    torch_home = os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(
        os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch")))
    return os.path.join(torch_home, "hub")


def set_dir(d):
    """Use d as the hub cache directory (set_dir(None) returns to the default)."""
    global _hub_dir
    _hub_dir = None if d is None else os.path.expanduser(d)


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Download url to the file dst, as torch.hub.download_url_to_file: into a temporary
    file beside dst moved there when complete (a broken download never replaces dst), with
    the SHA256 of the contents checked against hash_prefix when given."""
    dst = os.path.expanduser(dst)
    for _ in range(tempfile.TMP_MAX):
        tmp_dst = dst + "." + uuid.uuid4().hex + ".partial"
        try:
            f = open(tmp_dst, "w+b")
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "No usable temporary file name found")
    from urllib.request import Request, urlopen    # (http.client, ssl: ~30 ms, on first use)
    req = Request(url, headers={"User-Agent": "torch.hub"})
    try:
        with urlopen(req) as u:
            content_length = u.info().get_all("Content-Length")
            file_size = int(content_length[0]) if content_length else None
            sha256 = hashlib.sha256() if hash_prefix is not None else None
            with tqdm(total=file_size, disable=not progress, unit="B", unit_scale=True,
                      unit_divisor=1024) as pbar:
                while True:
                    buffer = u.read(READ_DATA_CHUNK)
                    if len(buffer) == 0:
                        break
                    f.write(buffer)
                    if sha256 is not None:
                        sha256.update(buffer)
                    pbar.update(len(buffer))
            f.close()
            if sha256 is not None:
                digest = sha256.hexdigest()
                if digest[:len(hash_prefix)] != hash_prefix:
                    raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                                       f'"{digest}")')
        shutil.move(f.name, dst)
    finally:
        f.close()
        if os.path.exists(f.name):
            os.remove(f.name)


def _is_legacy_zip_format(filename):
    """Whether filename is a zip of one file (how checkpoints before PyTorch 1.6 shipped)."""
    if zipfile.is_zipfile(filename):
        with zipfile.ZipFile(filename) as zf:
            infolist = zf.infolist()
        return len(infolist) == 1 and not infolist[0].is_dir()
    return False


def _legacy_zip_load(filename, model_dir, map_location, weights_only):
    warnings.warn("Falling back to the old format < 1.6. This support will be deprecated in "
                  "favor of default zipfile format introduced in 1.6. Please redo torch.save() "
                  "to save it in the new zipfile format.", FutureWarning, stacklevel=3)
    with zipfile.ZipFile(filename) as f:
        member = f.infolist()[0]
        root = os.path.realpath(model_dir)
        target = os.path.realpath(os.path.join(root, member.filename))
        if os.path.commonpath([root, target]) != root:      # (no zip-slip out of model_dir)
            raise ValueError(f"Unsafe zip entry outside {model_dir}: {member.filename}")
        f.extract(member, model_dir)
    return _load(os.path.join(model_dir, member.filename), map_location=map_location,
                 weights_only=weights_only)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=False):
    """The object saved at url, as torch.hub.load_state_dict_from_url: downloaded once into
    model_dir (default get_dir()/checkpoints) under the URL's file name (or file_name),
    checked against the sha256 prefix in that name with check_hash (name-<sha256>.ext),
    then loaded with llgrad.load (PyTorch's checkpoint format)."""
    if os.getenv("TORCH_MODEL_ZOO"):
        warnings.warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead",
                      stacklevel=2)
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = os.path.basename(urlparse(url).path)
    if file_name is not None:
        filename = file_name
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        hash_prefix = None
        if check_hash:
            r = HASH_REGEX.search(filename)
            hash_prefix = r.group(1) if r else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    if _is_legacy_zip_format(cached_file):
        return _legacy_zip_load(cached_file, model_dir, map_location, weights_only)
    return _load(cached_file, map_location=map_location, weights_only=weights_only)


def list(github, force_reload=False, skip_validation=False, trust_repo="check",  # noqa: A001
         verbose=True):
    """The callable entry points (names not starting with _) of a cached repository's
    hubconf.py, as torch.hub.list."""
    return entry_points(repo_dir(github, force_reload, get_dir()))


def help(github, model, force_reload=False, skip_validation=False,  # noqa: A001
         trust_repo="check"):
    """The docstring of entry point model, as torch.hub.help."""
    return entry_doc(repo_dir(github, force_reload, get_dir()), model)


def load(repo_or_dir, model, *args, source="github", trust_repo="check", force_reload=False,
         verbose=True, skip_validation=False, **kwargs):
    """What entry point model of repo_or_dir's hubconf.py makes of args and kwargs, as
    torch.hub.load: source='local' takes a directory; 'github' a repository in the hub cache
    (owner/name[:ref])."""
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        repo_or_dir = repo_dir(repo_or_dir, force_reload, get_dir())
    return load_local(repo_or_dir, model, *args, **kwargs)
