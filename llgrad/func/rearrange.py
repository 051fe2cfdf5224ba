"""torch.func.rearrange: einops.rearrange's patterns ("b (h h1) w c -> b h (w h1 c)") as a
reshape to the elementary axes, a permute and a reshape to the result's groups (views where
the layout allows, so gradients and compiled code follow). The pattern's parsing and its
errors are PyTorch's (functorch/einops/_parsing.py)."""
import functools
import keyword
import math
import warnings

from ..runtime.functions import stack
from ..runtime.tensor import Tensor

__all__ = ["rearrange"]

_ELLIPSIS = "\u2026"


class DimensionBindError(Exception):
    """An axis length that does not fit the tensor (functorch.dim.DimensionBindError)."""


class _Expression:
    """One side of a pattern: composition is a list of groups (lists of names, [] for a
    "1") and _ELLIPSIS."""

    def __init__(self, expression):
        self.has_ellipsis, self.ellipsis_parenthesized = False, None
        self.identifiers, self.composition = set(), []
        self.non_unitary_anonymous = False
        if "." in expression:
            if "..." not in expression:
                raise ValueError("Expression may contain dots only inside ellipsis (...)")
            if expression.count("...") != 1 or expression.count(".") != 3:
                raise ValueError("Expression may contain dots only inside ellipsis (...); "
                                 "only one ellipsis for tensor ")
            expression = expression.replace("...", _ELLIPSIS)
            self.has_ellipsis = True
        group, name = None, None
        for char in expression + " ":
            if char in "() ":
                if name is not None:
                    self._add(name, group)
                name = None
                if char == "(":
                    if group is not None:
                        raise ValueError("Axis composition is one-level (brackets inside "
                                         "brackets not allowed)")
                    group = []
                elif char == ")":
                    if group is None:
                        raise ValueError("Brackets are not balanced")
                    self.composition.append(group)
                    group = None
            elif char.isalnum() or char in ("_", _ELLIPSIS):
                name = char if name is None else name + char
            else:
                raise ValueError(f"Unknown character '{char}'")
        if group is not None:
            raise ValueError(f"Imbalanced parentheses in expression: '{expression}'")

    def _add(self, x, group):
        if x in self.identifiers:
            raise ValueError(f"Indexing expression contains duplicate dimension '{x}'")
        if x == _ELLIPSIS:
            self.identifiers.add(x)
            (self.composition if group is None else group).append(x)
            self.ellipsis_parenthesized = group is not None
            return
        if x.isdecimal() and int(x) == 1:
            if group is None:
                self.composition.append([])
            return
        if x.isdecimal():
            if int(x) < 1:
                raise ValueError(f"Anonymous axis should have positive length, not {int(x)}")
            self.non_unitary_anonymous = True
        else:
            reason = _bad_name(x)
            if reason:
                raise ValueError(f"Invalid axis identifier: {x}\n{reason}")
        self.identifiers.add(x)
        (self.composition if group is None else group).append([x] if group is None else x)


def _bad_name(name):
    if not name.isidentifier():
        return "not a valid python identifier"
    if name[0] == "_" or name[-1] == "_":
        return "axis name should should not start or end with underscore"
    if keyword.iskeyword(name):
        warnings.warn(f"It is discouraged to use axes names that are keywords: {name}",
                      RuntimeWarning)
    if name == "axis":
        warnings.warn("It is discouraged to use 'axis' as an axis name and will raise an "
                      "error in future", FutureWarning)
    return ""


@functools.lru_cache(256)
def _parse(pattern, lengths):
    try:
        left_str, right_str = pattern.split("->")
    except ValueError:
        raise ValueError("Pattern must contain a single '->' separator") from None
    axes_lengths = dict(lengths)
    if _ELLIPSIS in axes_lengths:
        raise ValueError(f"'{_ELLIPSIS}' is not an allowed axis identifier")
    left, right = _Expression(left_str), _Expression(right_str)
    if not left.has_ellipsis and right.has_ellipsis:
        raise ValueError(f"Ellipsis found in right side, but not left side of a pattern "
                         f"{pattern}")
    if left.has_ellipsis and left.ellipsis_parenthesized:
        raise ValueError(f"Ellipsis is parenthesis in the left side is not allowed: {pattern}")
    for length in axes_lengths.values():
        if type(length) is not int:
            raise TypeError(f"rearrange axis lengths must be integers, got: {type(length)}")
    if left.non_unitary_anonymous or right.non_unitary_anonymous:
        raise ValueError("rearrange only supports unnamed axes of size 1")
    difference = left.identifiers ^ right.identifiers
    if difference:
        raise ValueError(f"Identifiers only on one side of rearrange expression (should be on "
                         f"both): {difference}")
    unmatched = axes_lengths.keys() - left.identifiers
    if unmatched:
        raise ValueError(f"Identifiers not found in rearrange expression: {unmatched}")
    return left, right


def _groups(composition, n_ellipsis):
    """Each group as a list of elementary axis names (the ellipsis as its own axes)."""
    out = []
    for group in composition:
        if group == _ELLIPSIS:
            out.extend([f"{_ELLIPSIS}{j}"] for j in range(n_ellipsis))
        else:
            out.append([a for x in group for a in
                        ([f"{_ELLIPSIS}{j}" for j in range(n_ellipsis)] if x == _ELLIPSIS
                         else [x])])
    return out


def rearrange(tensor, pattern, **axes_lengths):
    """As torch.func.rearrange (einops.rearrange): transpose, reshape, squeeze, unsqueeze,
    stack and concatenate by a pattern; a list or tuple of tensors is stacked first."""
    if not isinstance(tensor, Tensor):
        tensor = stack(tensor)
    left, right = _parse(pattern, tuple(axes_lengths.items()))
    ndim = tensor.dim()
    if left.has_ellipsis:
        n_ellipsis = ndim - (len(left.composition) - 1)
        if len(left.identifiers) - 1 + sum(not g for g in left.composition) > ndim:
            raise ValueError(f"Number of dimensions in pattern "
                             f"({len(left.identifiers) - 1 + sum(not g for g in left.composition)}"
                             f") must be less than or equal to the number of dimensions in the "
                             f"tensor ({ndim})")
    else:
        n_ellipsis = 0
        if len(left.composition) != ndim:
            raise ValueError(f"Number of dimensions in pattern ({len(left.composition)}) must "
                             f"be equal to the number of dimensions in the tensor ({ndim})")
    left_groups = _groups(left.composition, n_ellipsis)
    if not any(left_groups) and not any(not g for g in left.composition):
        return tensor       # (no dims at all: PyTorch's returns its input)
    sizes, first_class, i = {}, {}, 0       # (PyTorch's names d0, d1, ... in its errors)
    for group in left_groups:
        for a in group or [None]:
            first_class[a] = f"d{i}"
            i += 1
    for group, size in zip(left_groups, tensor.shape):
        known = [axes_lengths.get(a) for a in group]
        unknown = [a for a, k in zip(group, known) if k is None]
        if len(unknown) > 1:
            raise DimensionBindError(f"cannot infer the sizes of two dimensions at once "
                                     f"{first_class[unknown[0]]} and "
                                     f"{first_class[unknown[1]]}")
        if all(k is not None for k in known):
            if math.prod(known) != size:
                raise DimensionBindError(f"Dimension sizes to do not match ({size} != "
                                         f"{math.prod(known)}) when matching dimension pack "
                                         f"({', '.join(first_class[a] for a in group)},)")
        elif sum(k is None for k in known) == 1:
            part = math.prod(k for k in known if k is not None)
            if size % part:
                shown = tuple(k if k is not None else "?" for k in known)
                raise DimensionBindError(f"inferred dimension does not evenly fit into larger "
                                         f"dimension: {size} vs {shown}")
            known = [k if k is not None else size // part for k in known]
        for a, k in zip(group, known):
            sizes[a] = k
    order = [a for g in _groups(left.composition, n_ellipsis) for a in g]
    targets = _groups(right.composition, n_ellipsis)
    x = tensor.reshape([sizes[a] for a in order]) if order else tensor.reshape(())
    wanted = [a for g in targets for a in g]
    x = x.permute([order.index(a) for a in wanted])
    return x.reshape([math.prod(sizes[a] for a in g) for g in targets])
