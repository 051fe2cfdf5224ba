"""The on-disk kernel cache. Its entries are object code that llgrad runs, so they are
guarded as code is: whoever could write an entry llgrad loads could run code as the user.

What an entry is. A kernel's key is the SHA-256 of the graph's canonical IR text, the
lowering options, llgrad's version and code, the LLVM version, and the host CPU name and
features (see keys.key_for). Its file, `<key>.llk` in the cache directory, holds

    b"LLGRADK2"  u64 header length  header (JSON)  payload  tag (32 bytes)

The header records the key, the entry symbol and the sizes of the payload's three parts:
the object file, then the LLVM IR before and after optimisation (zlib-compressed, for
dumps). The tag is HMAC-SHA256, under the user's signing key, of everything before it (the
key and entry symbol included). A file is loaded only if its tag is right and its header
names the key asked for; anything else (truncated, corrupt, written for another key,
written by anyone else) is rebuilt and overwritten. Nothing in it is unpickled; the
prepared plans of the subdirectory `plans` (codegen/prepared.py) are, once their tag checks.

Where. The directory is LLGRAD_CACHE_DIR, else $XDG_CACHE_HOME/llgrad, else
~/.cache/llgrad (LLGRAD_CACHE_DIR=0 turns the disk cache off). The signing key, 32 random
bytes made on first use, is the file LLGRAD_CACHE_KEY_FILE, else
$XDG_DATA_HOME/llgrad/cache-key, else ~/.local/share/llgrad/cache-key: outside the cache
directory (a key inside it is refused), mode 0600, in a directory llgrad makes 0700.

How, as ccache, pip's cache and sshd's StrictModes do it:
- The directory is opened once (per process and path) with O_DIRECTORY | O_NOFOLLOW, and
  that descriptor is checked with fstat: a directory owned by the effective user that
  neither group nor others may write (else it is refused with one warning, and kernels live
  in memory only). Every entry is then opened, created, renamed and removed relative to
  that descriptor (openat/renameat: `dir_fd=`), so swapping the directory, or a component
  of its path, after the check changes nothing: the descriptor is the checked directory.
  (Each use compares the path's lstat with the descriptor; a directory swapped since is
  opened and checked afresh, and refused if it is not the user's.)
- An entry is opened with O_NOFOLLOW | O_NONBLOCK and read only if fstat of that
  descriptor says it is a regular file owned by the user that others cannot write: a
  symlink (to /dev/zero, say) is never followed, a FIFO never blocks the read, a device
  is never read.
- Every directory llgrad creates (the cache directory and its missing parents, the key's
  directory) is made mode 0700 whatever the umask (fchmod after mkdir).
- An entry is written to a private temporary file (O_CREAT | O_EXCL, 0600) and renamed
  into place, so readers only ever see whole files; temporary files more than an hour old
  (a writer killed mid-write) are removed when a process first writes to the directory.

What this protects: no other local user can make llgrad run code of theirs. They cannot
write the directory (it is refused if they could), and an entry llgrad did not write
under this user's key (copied in from another machine or account, restored from an
untrusted archive, forged with a recomputed hash) fails its tag and is rebuilt, never
run. What it does not protect: anything running as the user (or as root) can read the
key and sign entries, or as easily change llgrad's source, the Python installation or
the shell's start-up files; a copy of the key file signs entries for whoever holds it;
someone who can rename entries of a parent directory can make llgrad refuse the cache
(kernels are then compiled into memory only) but not load their code; entries are not
encrypted (only their owner can read them, at mode 0700)."""
import hmac
import json
import os
import secrets
import stat
import struct
import time
import zlib

from .cache_dir import (_CREATE_FLAGS, _READ_FLAGS, _directory, _read_all, _warn_once,
                        _write_all, cache_dir)
from .cache_dir import _reset as _reset_dirs
from .cache_key import KEY_BYTES, _signing_key, key_file
from .cache_key import _reset as _reset_keys

# the cache's face (cache_dir and key_file, KEY_BYTES live in cache_dir.py and
# cache_key.py: named here so that `cache.` keeps offering them)
__all__ = ["MAGIC", "TAG_BYTES", "KEY_BYTES", "MAX_ENTRY_BYTES", "STALE_TEMP_SECONDS",
           "cache_dir", "key_file", "load", "store", "sweep", "encode", "compress",
           "decompress", "seen", "mark_seen"]

MAGIC = b"LLGRADK2"
TAG_BYTES = 32
MAX_ENTRY_BYTES = 1 << 30           # a bigger "entry" is not one of ours: not read
STALE_TEMP_SECONDS = 3600           # a temporary file this old was left by a killed writer
_SUFFIX = ".llk"
_TEMP_PREFIX = ".tmp-"


def _reset():
    """Forget warnings, open directories and keys (tests; no other thread may be using
    the cache)."""
    _reset_dirs()
    _reset_keys()


# ---- entries ----------------------------------------------------------------------------
def _read_entry(d, name):
    """The bytes of entry `name` of directory d, or None unless it is a regular file owned
    by the user that others cannot write."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=d.fd)
    except OSError:                      # missing, a symlink (ELOOP), unreadable
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or \
                st.st_mode & 0o022 or st.st_size > MAX_ENTRY_BYTES:
            return None
        return _read_all(fd, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)


def load(key, sub=None):
    """(entry, object bytes, IR before, IR after: zlib-compressed) from the entry for key,
    or None when there is none or it fails any check (it will be rebuilt and
    overwritten). sub: the cache's subdirectory holding it (cache_dir._directory)."""
    with _directory(sub) as d:
        if d is None:
            return None
        secret = _signing_key(d)
        if secret is None:
            return None
        data = _read_entry(d, key + _SUFFIX)
    if data is None:
        return None
    return _decode(data, key, secret)


# ---- hints ------------------------------------------------------------------------------
# An empty file `<name>.seen` says a graph was compiled before (its kernel is likely here):
# compile then loads it before the call rather than building in the background. A hint
# only decides when the (verified) load happens: a forged one costs a wait, never trust.
def seen(name):
    """Whether the hint `name` is in the cache directory."""
    with _directory() as d:
        if d is None:
            return False
        try:
            return stat.S_ISREG(os.stat(name + ".seen", dir_fd=d.fd,
                                        follow_symlinks=False).st_mode)
        except OSError:
            return False


def mark_seen(name):
    """Leave the hint `name` (best effort)."""
    with _directory() as d:
        if d is None:
            return
        try:
            os.close(os.open(name + ".seen", _CREATE_FLAGS, 0o600, dir_fd=d.fd))
        except OSError:
            pass


def _tag(secret, data):
    return hmac.digest(secret, data, "sha256")


def _decode(data, key, secret=None):
    if secret is None:                   # (tests: the key of this process's cache)
        with _directory() as d:
            secret = d is not None and _signing_key(d)
        if not secret:
            return None
    head = len(MAGIC) + 8
    if len(data) < head + TAG_BYTES or not data.startswith(MAGIC):
        return None
    view = memoryview(data)
    if not hmac.compare_digest(_tag(secret, view[:-TAG_BYTES]), data[-TAG_BYTES:]):
        return None
    (hlen,) = struct.unpack_from("<Q", data, len(MAGIC))
    if hlen > len(data) - head - TAG_BYTES:
        return None
    try:
        header = json.loads(data[head:head + hlen].decode("utf-8"))
        sizes = [int(n) for n in header["sizes"]]
        if header["key"] != key or len(sizes) != 3 or min(sizes) < 0:
            return None
        start = head + hlen
        if start + sum(sizes) != len(data) - TAG_BYTES:
            return None
        a, b = start + sizes[0], start + sizes[0] + sizes[1]
        return str(header["entry"]), data[start:a], data[a:b], data[b:len(data) - TAG_BYTES]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def compress(text):
    return zlib.compress(text.encode("utf-8"), 1)


def decompress(blob):
    return zlib.decompress(blob).decode("utf-8") if blob else ""


def encode(key, entry, obj, ir_before, ir_after, secret):
    """The file for key; ir_before and ir_after: compressed (compress)."""
    parts = [bytes(obj), bytes(ir_before), bytes(ir_after)]
    header = json.dumps({"key": key, "entry": entry,
                         "sizes": [len(p) for p in parts]}).encode("utf-8")
    body = MAGIC + struct.pack("<Q", len(header)) + header + b"".join(parts)
    return body + _tag(secret, body)


def _create_temp(d):
    """(name, descriptor) of a new private temporary file in d."""
    name = f"{_TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}{_SUFFIX}"
    fd = os.open(name, _CREATE_FLAGS, 0o600, dir_fd=d.fd)
    try:
        os.fchmod(fd, 0o600)            # (whatever the umask took away)
    except OSError:
        os.close(fd)
        raise
    return name, fd


def store(key, entry, obj, ir_before, ir_after, sub=None):
    """Write the entry for key atomically (ir_before/ir_after compressed); a failure to
    write warns once and is otherwise harmless (the kernel is already in memory)."""
    with _directory(sub) as d:
        if d is None:
            return
        secret = _signing_key(d)
        if secret is None:
            return
        data = encode(key, entry, obj, ir_before, ir_after, secret)
        try:
            tmp, fd = _create_temp(d)
            try:
                try:
                    _write_all(fd, data)
                finally:
                    os.close(fd)
                os.replace(tmp, key + _SUFFIX, src_dir_fd=d.fd, dst_dir_fd=d.fd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=d.fd)
                except OSError:
                    pass
                raise
        except OSError as e:
            _warn_once(d.path, f"cannot be written ({e.strerror})")
        if not d.swept:
            d.swept = True
            sweep(d)


def sweep(d, older_than=STALE_TEMP_SECONDS):
    """Remove temporary files of d older than `older_than` seconds (left by writers that
    were killed); returns how many went."""
    gone, now = 0, time.time()
    try:
        names = os.listdir(d.fd)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(_TEMP_PREFIX):
            continue
        try:
            st = os.stat(name, dir_fd=d.fd, follow_symlinks=False)
            if st.st_uid == os.geteuid() and now - st.st_mtime > older_than:
                os.unlink(name, dir_fd=d.fd)
                gone += 1
        except OSError:
            continue
    return gone
