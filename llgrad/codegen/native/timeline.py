"""Timestamps of a cold build's critical path, when LLGRAD_TIMELINE=1: what this process did
when (trace start and end, plan start and end, the compile worker's start, each request sent
and answered) beside the worker's own marks (worker_main.py: Python up, llvmlite imported,
LLVM initialised, each request received and answered), so that one can see what waits on
what. time.monotonic() is one clock for every process of the machine (CLOCK_MONOTONIC), so
the two lists merge into one timeline. Off, mark() is one test of a constant."""
import os
import time

ENABLED = os.environ.get("LLGRAD_TIMELINE", "0") == "1"
_marks = []


def mark(what):
    if ENABLED:
        _marks.append((what, time.monotonic()))


def marks():
    """[(what, monotonic seconds)] marked in this process so far."""
    return list(_marks)


def _reset():
    _marks.clear()
