"""What torch.fx._symbolic_trace holds beside the tracer that a traced graph names: PH, the
placeholder a concrete_args entry may leave an argument as, and _assert_is_none, the check a
graph specialised on an argument being None calls (its code names it by this module's path)."""


class PHBase:
    """The type of PH: an argument of concrete_args left a placeholder."""

    def __repr__(self):
        return "PH"


PH = PHBase()


def _assert_is_none(value, msg):
    assert value is None, msg
