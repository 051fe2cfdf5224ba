"""Reading a compiled function: its guards, forward and backward IR, saved values, mutated
inputs, and on request the LLVM IR (before and after optimisation), the host assembly and
the graphs as Python source; LLGRAD_DUMP=dir writes all of it for every trace. Also the
note a failed trace adds to the user's exception."""
import os

from .backends import backward_run, forward_run
from .dot import entry_dot


class DumpText(str):
    """A dump: a str whose repr is the text itself, so that a REPL shows `fn.dump(x)`
    as lines rather than one escaped string (str() gives the same text)."""
    __slots__ = ()

    def __repr__(self):
        return str(self)

    def _repr_pretty_(self, p, cycle):      # (IPython)
        p.text(str(self))


def dump_text(cf, entry, llvm, asm, python, format):
    """Compiled function cf's dump of the entry its arguments select (see its dump)."""
    if entry is None:
        return DumpText(f"llgrad.compile({getattr(cf.fn, '__name__', 'fn')}): no compiled "
                        f"entry for these arguments ({cf._not_kept or 'it runs eagerly'})\n")
    if format == "dot":
        return DumpText(entry_dot(entry))
    if llvm or asm:
        forward_run(entry, sync=True)
        if entry.backward is not None:
            backward_run(entry, sync=True)
    text = format_entry(entry, python=python, llvm=llvm, asm=asm) + walk_text(cf, python) + \
        "".join(t.text() for t in cf._sizes.templates)     # (size_templates.py)
    source = cf._converted[1] if cf._converted else None
    return DumpText(text + ("\n== rewritten source (tensor-dependent control flow) ==\n"
                            + source if source else ""))


def format_entry(entry, python=False, llvm=False, asm=False):
    from ..codegen.pysource import graph_source
    parts = ["== guards ==", *(f"  {n}: {v!r}" for n, v in entry.guard_items),
             *(f"  value guard: %{g.value.name or '?'} == {g.expected!r}  # {g.loc}"
               for g in entry.forward.guards),
             "== forward ==", str(entry.forward)]
    if entry.forward.mutated:
        parts += ["== mutated inputs ==",
                  *(f"  {entry.forward.inputs[i].name}" for i in entry.forward.mutated)]
    if entry.attr_writes is not None:       # (attr_write_replay.Pending.finish puts them)
        writes, positions = entry.attr_writes
        parts += ["== tensors put into objects (after each call) =="] + [
            f"  {w.where()} = output{'s' if w.n > 1 else ''} "
            f"{', '.join(str(k) for k in positions[w.first:w.first + w.n])}" for w in writes]
    if entry.backward is not None:
        parts += ["== backward ==", str(entry.backward), "== saved values ==",
                  saved_table_rows(entry.saved)]
    if llvm:
        for which, k in getattr(entry, "kernels", {}).items():
            if isinstance(k, str):
                parts += [f"== {which} LLVM IR ==", f"  ({k})"]
            else:
                if k.plan.graph is not k.graph:     # what codegen.lower.simplify made of it
                    parts += [f"== {which} as lowered (expand_composites, cse, dce) ==",
                              str(k.plan.graph)]
                parts += [f"== {which} loop plan (groups, buffers) ==", k.plan.describe()]
                if k.split is not None:
                    start, late, released = k.split
                    parts.append(f"split: groups {start}.. run after inputs "
                                 f"{list(released)} are let go of; they allocate output "
                                 f"slots {list(late)}")
                table = getattr(k, "size_table", None)
                if table is not None:
                    parts.append(f"shared between sizes: the code below is {k.entry_name}'s, "
                                 f"whose {len(table)} size-dependent numbers this size gives as "
                                 f"@{k.entry_name}_size_table = {table.tolist()}")
                parts += [f"== {which} LLVM IR (before optimisation) ==", k.ir_before,
                          f"== {which} LLVM IR (after optimisation) ==", k.ir_after]
    if asm:
        from ..codegen.native.jit import assembly
        for which, k in getattr(entry, "kernels", {}).items():
            parts += [f"== {which} assembly ==",
                      f"  ({k})" if isinstance(k, str) else assembly(k.compiled)]
    if python:
        parts += ["== forward as Python ==", graph_source(entry.forward)]
        if entry.backward is not None:
            parts += ["== backward as Python ==", graph_source(entry.backward)]
    return "\n".join(parts)


def _dump_to_env(cf, entry):
    d = os.environ.get("LLGRAD_DUMP")
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    forward_run(entry, sync=True)      # (built now: native kernels' IR is dumped)
    if entry.backward is not None:
        backward_run(entry, sync=True)
    path = os.path.join(d, f"{entry.name}_{cf.n_traces}.txt")
    with open(path, "w") as f:
        f.write(format_entry(entry, python=True, llvm=True) + "\n")


def _trace_note(name, tensors, exc):
    """What a failed trace adds to the user's exception (which is raised as it is): the
    compiled function, its tensor arguments, and the user's line that raised."""
    args = ", ".join(f"{n}: {t._dtype.name}{list(t.shape)}" for n, t in tensors)
    where, tb = None, exc.__traceback__
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if not os.path.abspath(f).startswith(package + os.sep):
            where = f"{f}:{tb.tb_lineno}"
        tb = tb.tb_next
    return (f"(raised while llgrad.compile traced {name}({args})"
            f"{' at ' + where if where else ''}; nothing was cached, the next call "
            "traces again)")


def saved_table_rows(saved):
    rows = [f"  {'name':8s} {'type':28s} {'bytes':>10s}  where"]
    for s in saved:
        rows.append(f"  {s.name:8s} {str(s.type):28s} {s.nbytes:>10,d}  {s.loc}")
    total = sum(s.nbytes for s in saved if s.input_index is None)
    rows.append(f"  total saved (excluding inputs): {total:,d} bytes")
    return "\n".join(rows)


def walk_text(cf, python):
    """How a call finds its entry: a flat key, compiled guard walkers (their source with
    python=True) or the full walk."""
    text = "\n== guard walk ==\n"
    if cf._plain:
        text += "  calls of positional tensors and numbers: a flat key (fastpath.py)\n"
    if cf._walkers:
        text += (f"  {len(cf._walkers)} compiled walker(s), one per call structure "
                 "(guard_walker.py)" + ("" if python else "; python=True shows them")
                 + "\n" + ("".join(w.source for w in cf._walkers) if python else ""))
    else:
        text += ("  other calls: the full walk (guards.collect); a walker is made on a "
                 "structure's second call\n")
    return text


def add_note(e, note):
    """BaseException.add_note (Python 3.11+). On 3.10 the note goes in __notes__ too, and
    joins a one-string message, since the traceback prints no __notes__ there."""
    if hasattr(e, "add_note"):
        e.add_note(note)
        return
    e.__notes__ = [*getattr(e, "__notes__", ()), note]
    if len(e.args) == 1 and isinstance(e.args[0], str):
        e.args = (f"{e.args[0]}\n{note}",)
