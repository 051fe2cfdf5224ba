"""Loading llgrad's object files without LLVM: an ELF64 x86-64 relocatable object (what the
JIT's target machine emits: large code model, so its relocations are 64-bit absolute or
PC-relative) copied into memory mapped for it, relocated and made executable.

A process that finds all its kernels in the disk cache never loads LLVM (~40 MB of
resident library and its heap) or makes an MCJIT engine; each object gets two mappings
(its code, read + execute; everything else, read + write) freed when its Image is.

`load(obj, resolve)` returns an Image, or None whenever the object holds anything this
loader does not handle (another machine, a relocation type other than R_X86_64_64 / PC64 /
PC32 / PLT32 in range, common or thread-local symbols, a symbol `resolve` cannot find):
the caller then loads it with MCJIT, as before."""
import ctypes
import struct
import sys

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")

_SHT_PROGBITS, _SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 1, 2, 4, 8, 9
_SHT_X86_64_UNWIND = 0x70000001
_SHF_ALLOC, _SHF_EXECINSTR, _SHF_TLS = 0x2, 0x4, 0x400
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS = 0, 0xff00, 0xfff1
_STT_SECTION, _STT_TLS = 3, 6
_R_64, _R_PC32, _R_PLT32, _R_PC64 = 1, 2, 4, 24

_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20
_PAGE = 4096

_libc = None


def _c():
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _libc = libc
    return _libc


def supported():
    """Whether this process can load objects itself (Linux on x86-64)."""
    import platform
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


class _Region:
    """An anonymous private mapping, unmapped when collected."""

    def __init__(self, size):
        self.size = max(_PAGE, -(-size // _PAGE) * _PAGE)
        addr = _c().mmap(None, self.size, _PROT_READ | _PROT_WRITE,
                         _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise MemoryError("mmap failed for an object's code")
        self.addr = addr

    def protect(self, prot):
        if _c().mprotect(self.addr, self.size, prot) != 0:
            raise OSError(ctypes.get_errno(), "mprotect failed for an object's code")

    def __del__(self):
        # (_c is None once the interpreter tears this module down at exit: the mapping goes
        # with the process, and a pool worker may still be inside the code it holds)
        if getattr(self, "addr", None) and _c is not None:
            _c().munmap(self.addr, self.size)
            self.addr = None


class Image:
    """A loaded object: its regions (kept mapped while the Image lives) and the addresses
    of its defined global symbols."""

    def __init__(self, regions, symbols, nbytes):
        self._regions = regions
        self.symbols = symbols
        self.nbytes = nbytes

    def address_of(self, name):
        return self.symbols.get(name, 0)


def _sections(obj):
    ident, etype, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, shstrndx = \
        _EHDR.unpack_from(obj, 0)
    if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1 or etype != 1 \
            or machine != 62 or shentsize != _SHDR.size:
        return None
    return [_SHDR.unpack_from(obj, shoff + k * shentsize) for k in range(shnum)]


def _name(obj, strtab_off, off):
    end = obj.index(b"\0", strtab_off + off)
    return obj[strtab_off + off:end].decode()


def load(obj, resolve):
    """An Image of the object `obj` (bytes), or None where this loader does not handle it;
    resolve(name) -> address or None for its undefined symbols."""
    obj = bytes(obj)
    secs = _sections(obj)
    if secs is None:
        return None
    # place the allocated sections: code in one region, the rest in another
    places, sizes = {}, [0, 0]
    for k, (_, typ, flags, _, _, size, _, _, align, _) in enumerate(secs):
        if not flags & _SHF_ALLOC or size == 0 or typ == _SHT_X86_64_UNWIND:
            continue                # (unwind tables: nothing unwinds through kernels)
        if flags & _SHF_TLS or typ not in (_SHT_PROGBITS, _SHT_NOBITS):
            return None
        r = 0 if flags & _SHF_EXECINSTR else 1
        align = max(align, 1)
        off = -(-sizes[r] // align) * align
        places[k] = (r, off)
        sizes[r] = off + size
    symtab = next(((k, s) for k, s in enumerate(secs) if s[1] == _SHT_SYMTAB), None)
    if symtab is None or any(s[1] == _SHT_REL for s in secs):
        return None
    regions = [_Region(sizes[0]), _Region(sizes[1])]
    base = {k: regions[r].addr + off for k, (r, off) in places.items()}
    for k, (r, off) in places.items():
        _, typ, _, _, src, size, _, _, _, _ = secs[k]
        if typ == _SHT_PROGBITS:
            ctypes.memmove(base[k], obj[src:src + size], size)
        # (NOBITS: the fresh mapping is zeros already)
    # the symbols' addresses
    _, _, _, _, sym_off, sym_size, str_link, _, _, sym_ent = symtab[1]
    str_off = secs[str_link][4]
    addrs, exported = [], {}
    for i in range(sym_size // sym_ent):
        st_name, info, _, shndx, value, _ = _SYM.unpack_from(obj, sym_off + i * sym_ent)
        kind, bind = info & 0xf, info >> 4
        name = _name(obj, str_off, st_name) if st_name else ""
        if kind == _STT_TLS:
            return None
        if kind == _STT_SECTION:
            addrs.append(base.get(shndx, 0))
        elif shndx == _SHN_UNDEF:
            if i == 0:
                addrs.append(0)
                continue
            a = resolve(name)
            if not a:
                return None
            addrs.append(a)
        elif shndx == _SHN_ABS:
            addrs.append(value)
        elif shndx >= _SHN_LORESERVE or shndx not in base:
            return None                     # (common symbols, or a section not loaded)
        else:
            addrs.append(base[shndx] + value)
            if bind != 0 and name:          # (global and weak definitions)
                exported[name] = addrs[-1]
    # relocations
    for _, typ, _, _, off, size, link, info, _, ent in secs:
        if typ != _SHT_RELA or info not in base:
            continue
        if link != symtab[0]:
            return None
        target = base[info]
        for j in range(size // ent):
            r_off, r_info, addend = _RELA.unpack_from(obj, off + j * ent)
            kind, sym = r_info & 0xffffffff, r_info >> 32
            p = target + r_off
            s = addrs[sym]
            if kind == _R_64:
                ctypes.c_uint64.from_address(p).value = (s + addend) & 0xffffffffffffffff
            elif kind == _R_PC64:
                ctypes.c_uint64.from_address(p).value = (s + addend - p) & 0xffffffffffffffff
            elif kind in (_R_PC32, _R_PLT32):
                v = s + addend - p
                if not -(1 << 31) <= v < (1 << 31):
                    return None
                ctypes.c_int32.from_address(p).value = v
            else:
                return None
    regions[0].protect(_PROT_READ | _PROT_EXEC)
    return Image(regions, exported, regions[0].size + regions[1].size)


def process_symbol(name):
    """The address of a symbol the process defines (libc, libm: what compiled code may call,
    memset for instance), or None."""
    try:
        return ctypes.cast(getattr(_c(), name), ctypes.c_void_p).value
    except AttributeError:
        return None
