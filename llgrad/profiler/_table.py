"""The text table of profiled events, in PyTorch's layout (torch.autograd.profiler_util's
_build_table): a name column, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg,
CPU Mem and Self CPU Mem (profile_memory), # of Calls, Input Shapes (when recorded and
grouped by), Source Location (with_stack, grouped by stack), and the footer
'Self CPU time total: ...'. llgrad has no device time, overload names or FLOPs columns."""

SPACING = 2
COLUMN = 12


def format_time(time_us):
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def format_time_share(time_us, total_us):
    if total_us == 0:
        return "NaN"
    return f"{time_us * 100.0 / total_us:.2f}%"


def format_memory(nbytes):
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes * 1.0 / gb:.2f} GB"
    if abs(nbytes) >= mb:
        return f"{nbytes * 1.0 / mb:.2f} MB"
    if abs(nbytes) >= kb:
        return f"{nbytes * 1.0 / kb:.2f} KB"
    return str(nbytes) + " B"


def _unit(time_us, default, time_unit):
    if time_unit == "s":
        return f"{time_us / 1e6:.3f}s"
    if time_unit == "ms":
        return f"{time_us / 1e3:.3f}ms"
    if time_unit == "us":
        return f"{time_us:.3f}us"
    return default


def _trim_path(path, width):
    if len(path) > width:
        path = path[len(path) - width:]
        if len(path) > 3:
            path = "..." + path[3:]
    return path


def build_table(events, sort_by=None, header=None, row_limit=100, max_src_column_width=75,
                max_name_column_width=55, max_shapes_column_width=80, profile_memory=False,
                top_level_events_only=False, time_unit=None):
    """The table of events (FunctionEvents or FunctionEventAvgs) as a string."""
    if len(events) == 0:
        return ""
    if sort_by is not None:
        attr = sort_by.replace("cuda", "device").replace("xpu", "device")
        events = sorted(events, key=lambda e: getattr(e, attr), reverse=True)
    has_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in events)
    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    stacks = [e.stack for e in events if e.stack is not None and len(e.stack) > 0]
    src_width = None
    if stacks:
        src_width = max(max(len(s) for s in st) for st in stacks) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)

    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
    headers.append("# of Calls")
    fmt, sep, length = "", "", -SPACING

    def column(width, align=">"):
        nonlocal fmt, sep, length
        fmt += "{: " + align + str(width) + "}" + " " * SPACING
        sep += "-" * width + " " * SPACING
        length += width + SPACING

    column(name_width)
    for _ in headers[1:]:
        column(COLUMN)
    if has_shapes:
        headers.append("Input Shapes")
        column(shapes_width)
    if stacks:
        headers.append("Source Location")
        column(src_width, "<")

    total_self = sum(e.self_cpu_time_total for e in events)
    out = []

    def line(s):
        out.append(s)
        out.append("\n")

    if header is not None:
        line("=" * length)
        line(header)
    if top_level_events_only:
        line("=" * length)
        line("This report only display top-level ops statistics")
    line(sep)
    line(fmt.format(*headers))
    line(sep)
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, format_time_share(e.self_cpu_time_total, total_self),
               _unit(e.self_cpu_time_total, format_time(e.self_cpu_time_total), time_unit),
               format_time_share(e.cpu_time_total, total_self),
               _unit(e.cpu_time_total, format_time(e.cpu_time_total), time_unit),
               _unit(e.cpu_time, format_time(e.cpu_time), time_unit)]
        if profile_memory:
            row += [format_memory(e.cpu_memory_usage), format_memory(e.self_cpu_memory_usage)]
        row.append(e.count)
        if has_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        if stacks:
            row.append(_trim_path(e.stack[0], src_width) if e.stack else "")
        line(fmt.format(*row))
        if stacks:
            empty = [""] * (len(headers) - 1)
            for entry in (e.stack or [])[1:]:
                line(fmt.format(*(empty + [_trim_path(entry, src_width)])))
            line(fmt.format(*(empty + [""])))
    line(sep)
    line(f"Self CPU time total: {_unit(total_self, format_time(total_self), time_unit)}")
    return "".join(out)
