"""Command line: `python -m llgrad demo`, `python -m llgrad dump FILE.py:FUNC --args ...`
(`--llvm --asm --python --dot --svg`), `python -m llgrad --version`."""
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


def dump(target, arg_specs, python=False, llvm=False, asm=False, dot=False, svg=None,
         out=None):
    """Print the dumps of FILE.py:FUNC compiled for arguments of the given types (with
    dot: the graphs as Graphviz DOT; with svg: write them as an SVG picture to svg)."""
    cf, args = _compiled(target, arg_specs)
    if svg is not None:
        from llgrad.compile.dot import dot_program, entry_model, render_svg
        entry = cf._entry_for(args, {})
        if entry is None:
            raise SystemExit(f"llgrad dump --svg: {cf.dump(*args).strip()}")
        if not dot_program():
            sys.stderr.write("llgrad dump --svg: Graphviz's `dot` program is not installed "
                             "(apt install graphviz, brew install graphviz, conda install "
                             "graphviz); drawing with llgrad's own simple layout instead "
                             "(--dot prints the DOT text for another renderer)\n")
        text, how = render_svg(entry_model(entry))
        with open(svg, "w") as f:
            f.write(text)
        print(f"wrote {svg} ({how})")
        return
    text = cf.dump(*args, format="dot") if dot else \
        cf.dump(*args, python=python, llvm=llvm, asm=asm)
    if out:
        with open(out, "w") as f:
            f.write(text)
        print(f"wrote {out}")
    else:
        print(text)


def _compiled(target, arg_specs):
    """(the compiled function FILE.py:FUNC names, example arguments of the given types)."""
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
    cf = getattr(fn, "_compiled", fn)
    cf = cf if isinstance(cf, CompiledFunction) else llgrad.compile(fn)
    args = [_example(s) for s in arg_specs.split()] if arg_specs else []
    return cf, args


def version():
    """llgrad's version and what it runs on."""
    import platform

    import llvmlite
    import llvmlite.binding as llvm
    import numpy

    from .version import __version__
    return (f"llgrad {__version__} (Python {platform.python_version()}, NumPy "
            f"{numpy.__version__}, llvmlite {llvmlite.__version__}, LLVM "
            f"{'.'.join(map(str, llvm.llvm_version_info))})")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m llgrad")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("demo", help="train a classifier with a compiled training step")
    c = sub.add_parser("coverage", help="which public names of PyTorch llgrad has")
    c.add_argument("--counts-only", action="store_true", help="the counts, not missing names")
    c.add_argument("--markdown", action="store_true", help="the counts as a Markdown table")
    d = sub.add_parser("dump", help="print the IR dumps of a compiled function")
    d.add_argument("target", help="FILE.py:FUNC")
    d.add_argument("--args", default="", help='argument types, e.g. "f32[32,64] f32[64,10]"')
    d.add_argument("--llvm", action="store_true",
                   help="add the loop plan and the LLVM IR before and after optimisation")
    d.add_argument("--asm", action="store_true", help="add the host assembly")
    d.add_argument("--python", action="store_true", help="add the graphs as Python source")
    d.add_argument("--dot", action="store_true",
                   help="print the forward and backward graphs as Graphviz DOT instead")
    d.add_argument("--svg", nargs="?", const="", default=None, metavar="FILE",
                   help="write the graphs as an SVG picture (default FUNC.svg), through "
                        "Graphviz's dot where installed")
    d.add_argument("-o", "--output", default=None, help="write the dump to this file")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.version:
        print(version())
        return 0
    if args.cmd is None:
        p.error("a command is required (demo, dump, coverage) or --version")
    if args.cmd == "demo":
        demo()
    elif args.cmd == "coverage":
        from .coverage import main as coverage
        return coverage(show_missing=not args.counts_only, as_markdown=args.markdown)
    else:
        svg = args.svg
        if svg == "":
            svg = args.output or f"{args.target.rpartition(':')[2]}.svg"
        dump(args.target, args.args, python=args.python, llvm=args.llvm, asm=args.asm,
             dot=args.dot, svg=svg, out=args.output if svg is None else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
