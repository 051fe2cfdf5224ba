"""llgrad.utils.benchmark: torch.utils.benchmark's Python timer, for the recipes that time
code with it (Timer, Measurement, Compare).

Timer(stmt, setup, globals=..., label, sub_label, description, num_threads) runs Python
statements with timeit (`torch` in their globals is llgrad unless globals give one):
timeit(number), repeat(repeat, number), blocked_autorange(min_run_time) and
adaptive_autorange(threshold, max_run_time) give a Measurement (times per run, mean,
median, iqr, number_per_run, its report as repr); Compare(measurements).print() prints
their medians as a table (rows: sub_label or stmt, columns: description). Timing C++
statements (Language.CPP) and callgrind counts are not available (NotImplementedError)."""
import enum
import sys
import textwrap
import timeit

import numpy as np

__all__ = ["Compare", "Language", "Measurement", "Timer", "select_unit"]


class Language(enum.Enum):
    """The language of a Timer's statement, as torch.utils.benchmark.Language."""
    PYTHON = 0
    CPP = 1


def select_unit(t):
    """(unit, scale) for a time in seconds, as torch.utils.benchmark.select_unit."""
    time_unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(np.log10(t) // 3), "s") if t > 0 \
        else "ns"
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[time_unit]
    return time_unit, scale


class Measurement:
    """A Timer's result, as torch.utils.benchmark.Measurement: raw_times (seconds per block
    of number_per_run runs), times (per run), mean, median, iqr, and the task's stmt /
    setup / label / sub_label / description / num_threads."""

    def __init__(self, number_per_run, raw_times, task_spec, metadata=None):
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.task_spec = task_spec
        self.metadata = metadata

    def __getattr__(self, name):
        spec = self.__dict__.get("task_spec")
        if spec is not None and name in spec:
            return spec[name]
        raise AttributeError(f"'Measurement' object has no attribute '{name}'")

    @property
    def times(self):
        """Seconds per run of each block."""
        return [t / self.number_per_run for t in self.raw_times]

    def _q(self, q):
        return float(np.quantile(np.array(self.times, dtype=np.float64), q))

    @property
    def median(self):
        """The median of times."""
        return self._q(0.5)

    @property
    def mean(self):
        """The mean of times."""
        return float(np.mean(self.times))

    @property
    def iqr(self):
        """The interquartile range of times."""
        return self._q(0.75) - self._q(0.25)

    @property
    def title(self):
        """label: sub_label (or the statement), as the report's first line."""
        label = self.label or self.stmt
        return f"{label}: {self.sub_label}" if self.sub_label else label

    def meets_confidence(self, threshold=0.1):
        """Whether iqr / median is under threshold."""
        return self.iqr / self.median < threshold

    def __repr__(self):
        unit, scale = select_unit(self.median)
        n = len(self.times)
        lines = [f"<{__name__}.Measurement object at {hex(id(self))}>", self.title]
        if self.description:
            lines.append(self.description)
        if self.setup and self.setup != "pass":
            lines.append("setup: " + self.setup)
        if n >= 4:
            lines += [f"  Median: {self.median / scale:.2f} {unit}",
                      f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._q(0.25) / scale:.2f} "
                      f"to {self._q(0.75) / scale:.2f})"]
        else:
            lines.append(f"  {self.median / scale:.2f} {unit}")
        per = "per measurement" if n > 1 else ""
        plural = "s" if n > 1 else ""
        threads = f"{self.num_threads} thread" + ("s" if self.num_threads > 1 else "")
        lines.append(f"  {n} measurement{plural}, {self.number_per_run} runs {per}, {threads}")
        return "\n".join(lines)


class Timer:
    """Times a Python statement, as torch.utils.benchmark.Timer."""

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timeit.default_timer,
                 globals=None, label=None, sub_label=None, description=None, env=None,
                 num_threads=1, language=Language.PYTHON):
        if language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("llgrad's benchmark Timer times Python statements only")
        stmt, setup = textwrap.dedent(stmt).strip(), textwrap.dedent(setup).strip()
        env_globals = {"torch": sys.modules[__name__.split(".")[0]]}
        env_globals.update(globals or {})
        self._timer = timeit.Timer(stmt, setup or "pass", timer, env_globals)
        self._spec = {"stmt": stmt, "setup": setup, "global_setup": global_setup,
                      "label": label, "sub_label": sub_label, "description": description,
                      "env": env, "num_threads": num_threads}

    def _measure(self, number, raw_times):
        return Measurement(number, raw_times, dict(self._spec))

    def timeit(self, number=1000000):
        """One block of `number` runs (after number // 100 warm-up runs, at least 2)."""
        self._timer.timeit(max(number // 100, 2))
        return self._measure(number, [self._timer.timeit(number)])

    def repeat(self, repeat=-1, number=-1):
        """Not available (as in PyTorch, which raises NotImplementedError too)."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        """Not available (as in PyTorch, which raises NotImplementedError too)."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _block_size(self, min_run_time):
        overhead = float(np.median([self._timer.timeit(0) for _ in range(5)]))
        number = 1
        while True:     # (PyTorch's estimate: the timer's overhead made negligible)
            t = self._timer.timeit(number)
            if (overhead / t <= 1e-4 and t >= min_run_time / 1000) or t > min_run_time \
                    or number * 10 > 2147483647:
                return number
            number *= 10

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Blocks of runs until min_run_time seconds have been measured."""
        number = self._block_size(min_run_time)
        times, total = [], 0.0
        while total < min_run_time or not times:
            t = self._timer.timeit(number)
            if callback is not None:
                callback(number, t)
            times.append(t)
            total += t
        return self._measure(number, times)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None):
        """Blocks of runs until the iqr / median is under threshold (at least min_run_time
        and 3 blocks; at most max_run_time seconds)."""
        number = self._block_size(min_run_time)
        times, total = [], 0.0
        while True:
            t = self._timer.timeit(number)
            if callback is not None:
                callback(number, t)
            times.append(t)
            total += t
            m = self._measure(number, times)
            if total >= max_run_time or (len(times) > 3 and total >= min_run_time
                                          and m.meets_confidence(threshold)):
                return m


class Compare:
    """Medians of several measurements as a table, as torch.utils.benchmark.Compare."""

    def __init__(self, results):
        self._results = list(results)

    def __str__(self):
        out = []
        for label in dict.fromkeys(r.label for r in self._results):
            group = [r for r in self._results if r.label == label]
            cols = list(dict.fromkeys(r.description or "" for r in group))
            rows = list(dict.fromkeys(r.sub_label or r.stmt for r in group))
            unit, scale = select_unit(min(r.median for r in group))
            cell = {(r.sub_label or r.stmt, r.description or ""): r.median / scale
                    for r in group}
            width = max(len(str(x)) for x in rows + ["threads"]) + 2
            out.append(f"[---- {label or ''} ----]")
            out.append(" " * width + "|" + "|".join(f"{c:>10}" for c in cols))
            for row in rows:
                vals = "|".join(f"{cell[row, c]:>10.1f}" if (row, c) in cell else " " * 10
                                for c in cols)
                out.append(f"{row:>{width}}|{vals}")
            out.append(f"\nTimes are in {_ENGLISH[unit]} ({unit}).\n")
        return "\n".join(out)

    def print(self):
        """Print the table."""
        print(str(self))

    def trim_significant_figures(self):
        """Accepted; the table's medians always show one decimal."""

    def colorize(self, rowwise=False):
        """Accepted; the table is not coloured."""

    def highlight_warnings(self):
        """Accepted; no warnings are marked."""

    def extend_results(self, results):
        """Add measurements to the table."""
        self._results.extend(results)


_ENGLISH = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds"}
