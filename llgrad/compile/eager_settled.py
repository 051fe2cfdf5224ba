"""A compiled function whose calls all run eagerly stops walking their guards.

A call's guard walk (guards.collect) reads everything the function reaches: a replay memory
of 2,500 NumPy arrays is 2,500 tensor inputs and their contents, 455 ms a call of a SAC
update that eager runs in 27 (the update draws from random.Random and reaches the previous
update's graph, so every call runs eagerly). The walk only finds which entry runs; when
every entry found is "run eagerly", it buys nothing. So once SETTLE calls in a row have run
eagerly (traced to an eager entry, or finding one) and the function has no compiled entry,
calls run eagerly without the walk, as torch.compile skips a frame it cannot compile. Eager
is the reference, so this changes no result, only which calls could have been compiled:
every CHECK-th skipped call (the period doubling up to MAX_CHECK) walks as before, and a call
that then traces or runs compiled code ends the settling (a program whose state changed so
that it compiles, e.g. once an input no longer reaches an old graph)."""
from . import stance

SETTLE = 3
CHECK = 16
MAX_CHECK = 1024


class EagerStreak:
    """Per compiled function: its run of eager calls and whether calls skip the walk."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.streak, self.settled, self.until_check, self.period = 0, False, 0, CHECK

    def skip(self):
        """Whether this call runs eagerly without a walk (settled, between two checks); a
        check walks, and settles again, for twice as long, if it runs eagerly too."""
        if not self.settled or stance.state.stance == "fail_on_recompile":
            return False            # (a new key must still raise there)
        if self.until_check > 0:
            self.until_check -= 1
            return True
        self.settled, self.streak = False, SETTLE - 1
        self.period = min(2 * self.period, MAX_CHECK)
        return False

    def eager_call(self, entries):
        """Note a walked call that ran eagerly; entries: the function's compiled entries
        (any keeps it from settling)."""
        if entries:
            self.reset()
            return
        self.streak += 1
        if self.streak >= SETTLE:
            self.settled, self.until_check = True, self.period


def ran_eagerly(cf, args, kwargs):
    """Run a call of compiled function cf whose walk found it runs eagerly, noting it."""
    cf._eager_streak.eager_call(cf.entries)
    return cf.fn(*args, **kwargs)
