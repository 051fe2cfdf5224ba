"""Command line: `python -m llgrad demo`, `python -m llgrad dump FILE.py:FUNC --args ...`."""
import argparse
import re
import sys
from pathlib import Path


def demo():
    from .demo import run
    run()


_ARG = re.compile(r"(f16|f32|f64|i64|i32|b8)\[([\d,\s]*)\]")


def _example(spec):
    """A random example tensor for a type such as f32[32,64] (floats require grad)."""
    import llgrad
    m = _ARG.fullmatch(spec.strip())
    if not m:
        raise SystemExit(f"llgrad dump: cannot read argument type {spec!r} (expected e.g. "
                         "f32[32,64], i64[8] or b8[4])")
    dt, dims = m.group(1), tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d)
    if dt.startswith("f"):
        t = llgrad.randn(*dims, dtype={"f16": llgrad.float16, "f32": llgrad.float32,
                                      "f64": llgrad.float64}[dt])
        return t.requires_grad_(True)
    return llgrad.zeros(*dims, dtype=llgrad.int64 if dt == "i64" else
                        llgrad.int32 if dt == "i32" else llgrad.bool)


def dump(target, arg_specs, python=False):
    """Print the dumps of FILE.py:FUNC compiled for arguments of the given types."""
    import importlib.util

    import llgrad
    from llgrad.compile.compiled_function import CompiledFunction
    path, _, func = target.rpartition(":")
    if not path or not func:
        raise SystemExit("llgrad dump: expected FILE.py:FUNC")
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if spec is None:
        raise SystemExit(f"llgrad dump: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, func, None)
    if fn is None:
        raise SystemExit(f"llgrad dump: {path} has no function {func!r}")
    cf = fn if isinstance(fn, CompiledFunction) else llgrad.compile(fn)
    args = [_example(s) for s in arg_specs.split()] if arg_specs else []
    print(cf.dump(*args, python=python))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m llgrad")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo", help="train a classifier with a compiled training step")
    d = sub.add_parser("dump", help="print the IR dumps of a compiled function")
    d.add_argument("target", help="FILE.py:FUNC")
    d.add_argument("--args", default="", help='argument types, e.g. "f32[32,64] f32[64,10]"')
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.cmd == "demo":
        demo()
    else:
        dump(args.target, args.args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
