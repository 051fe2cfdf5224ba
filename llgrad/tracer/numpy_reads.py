"""What `t.numpy()` gives while a function is traced, for a tensor of the trace: a read-only
view of its values, which, for a small integer or boolean t (lengths, indices), become value
guards as t.tolist()'s do (the trace serves calls where t holds them; a float or large t ends
the trace). NVIDIA's tacotron2 hands pack_padded_sequence `input_lengths.cpu().numpy()`,
which would otherwise run the whole step eagerly. A write through the array (eager's writes
reach t's memory) could not reach the compiled graph: NumPy refuses it, and trace_body turns
that refusal into a graph break (write_break). Nor could a later in-place write to t reach
the array's reads, whose values were read as they were then: the trace stops there too
(check_write)."""
from ..runtime.saved_tensor import Location, _internal
from .errors import TraceError


def numpy_view(tracer, t):
    # (a float tensor's values are data, another each call: they end the trace, as before)
    tracer.reads_out(t, "Tensor.numpy()", guard=t._data.dtype.kind in "biu")
    view = t._data.view()
    view.flags.writeable = False
    top = tracer
    while getattr(top, "parent", None) is not None:     # (a region's: its trace's)
        top = top.parent
    top.read_only_views = True
    top.numpy_storages = getattr(top, "numpy_storages", set()) | {tracer._sid(t)}
    return view


def check_write(tracer, sid):
    """Before an in-place write into the storage sid: a graph break if the code holds a view
    numpy_view gave of it."""
    top = tracer
    while getattr(top, "parent", None) is not None:
        top = top.parent
    if sid in getattr(top, "numpy_storages", ()):
        tracer.graph_break("an in-place write to a tensor whose Tensor.numpy() array the code "
                           "holds (the array's values were read before it)")


def run_body(tracer, body):
    """body(), the traced function's run: NumPy's refusal to write into a view numpy_view gave
    becomes a graph break."""
    try:
        return body()
    except ValueError as e:
        write_break(tracer, e)
        raise


def write_break(tracer, err):
    """Raise the graph break for err, NumPy's refusal to write into a view numpy_view gave;
    return for any other error."""
    if not (getattr(tracer, "read_only_views", False) and isinstance(err, ValueError)
            and "read-only" in str(err)):
        return
    where, tb = Location(("?", 0)), err.__traceback__
    while tb is not None:       # (the innermost of the user's frames: the write)
        if not _internal[tb.tb_frame.f_code.co_filename]:
            where = Location((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    tracer.broken = (f"a write into the array Tensor.numpy() gave (it could not reach the "
                     f"compiled graph) at {where}")
    raise TraceError(tracer.broken) from err
