"""llgrad.einsum: any equation (explicit or implicit output, `...`, repeated subscripts,
the sublist form), as a composite of views, sums, products and bmm, so that its gradient
is theirs, as in PyTorch.

The plan, PyTorch's: a subscript repeated within an operand takes that operand's diagonal;
a subscript found in one operand only and not in the output is summed away at once; the
operands are then combined left to right, each pair by bmm over (kept shared subscripts,
the left's own, the contracted ones) x (kept shared, contracted, the right's own), or by
a broadcast product when the pair shares nothing to contract; the result is permuted to
the output's order. Sizes of 1 broadcast, as PyTorch's einsum lets them."""
from __future__ import annotations
from .tensor import Tensor
from .autocast_cast import autocast_lower

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_equation(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [output sublist]) as an equation."""
    ops, terms = list(args[0::2]), [args[k] for k in range(1, len(args), 2)]
    out = ops.pop() if len(ops) > len(terms) else None

    def term(sub):
        return "".join("..." if s is Ellipsis else _LETTERS[s] for s in sub)
    lhs = ",".join(term(s) for s in terms)
    return lhs + ("->" + term(out) if out is not None else ""), ops


def _parse(term, ndim, k, at):
    """The labels of operand k's dims (its subscripts start at index `at` of the equation):
    letters, and ("...", j) for the ellipsis dims, j counted from the right (so that
    ellipses broadcast right-aligned)."""
    if term.count("...") > 1:
        raise RuntimeError(f"einsum(): found '.' for operand {k} for which an ellipsis was "
                           "already found")
    if term.replace("...", "").count("."):
        raise RuntimeError(f"einsum(): found '.' for operand {k} that is not part of any "
                           "ellipsis")
    for i, c in enumerate(term):
        if c not in _LETTERS and c != ".":
            raise RuntimeError(f"einsum(): invalid subscript given at index {at + i} in the "
                               "equation string, subscripts must be in [a-zA-Z]")
    if "..." not in term:
        if len(term) != ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(term)})"
                               f" does not match the number of dimensions ({ndim}) for operand "
                               f"{k} and no ellipsis was given")
        return list(term)
    pre, post = term.split("...")
    n = len(pre) + len(post)
    if n > ndim:
        raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n}) is more "
                           f"than the number of dimensions ({ndim}) for operand {k}")
    e = ndim - n
    return list(pre) + [("...", e - 1 - j) for j in range(e)] + list(post)


def _diagonals(t, labels, k):
    """Repeated subscripts of one operand: its diagonal over them (moved to the end)."""
    while True:
        dup = next((lab for lab in labels if labels.count(lab) > 1), None)
        if dup is None:
            return t, labels
        a = labels.index(dup)
        b = labels.index(dup, a + 1)
        na, nb = t.shape[a], t.shape[b]
        if na != nb:
            raise RuntimeError(f"einsum(): subscript {dup} is repeated for operand {k} but the "
                               f"sizes don't match, {nb} != {na}")
        t = t.diagonal(0, a, b)
        labels = [lab for i, lab in enumerate(labels) if i not in (a, b)] + [dup]


def _sizes(operands):
    sizes = {}
    for k, (t, labels) in enumerate(operands):
        for lab, n in zip(labels, t.shape):
            m = sizes.get(lab, 1)
            if n != 1 and m != 1 and n != m:
                name = "..." if isinstance(lab, tuple) else lab
                raise RuntimeError(f"einsum(): subscript {name} has size {n} for operand {k} "
                                   f"which does not broadcast with previously seen size {m}")
            sizes[lab] = n if n != 1 else m        # (a size 0 too: not max(0, 1))
    return sizes


def _permuted(t, labels, order):
    perm = [labels.index(lab) for lab in order]
    return t if perm == list(range(len(perm))) else t.permute(perm)


def _sum_out(t, labels, keep):
    dims = tuple(i for i, lab in enumerate(labels) if lab not in keep)
    if not dims:
        return t, labels
    return t.sum(dims), [lab for lab in labels if lab in keep]


def _size_one_summed(a, la, b, lb, lab):
    """A summed subscript of size 1 in a or b summed out of each alone (the other's
    dims over it first), as PyTorch's einsum does: a pair left with nothing else to sum is
    multiplied, not matmul'd, so its operands' dtypes promote (int by float, bool by bool)."""
    i, j = la.index(lab), lb.index(lab)
    if a.shape[i] != 1 and b.shape[j] != 1:
        return a, la, b, lb
    if a.shape[i] != 1:
        a = a.sum(i, keepdim=True)
    elif b.shape[j] != 1:
        b = b.sum(j, keepdim=True)
    return (a.squeeze(i), [x for x in la if x != lab], b.squeeze(j), [x for x in lb if x != lab])


def _pair(a, la, b, lb, keep, sizes):
    """a (labels la) combined with b (labels lb), summing the shared subscripts not kept."""
    for lab in [lab for lab in la if lab in lb and lab not in keep]:
        a, la, b, lb = _size_one_summed(a, la, b, lb, lab)
    batch = [lab for lab in la if lab in lb and lab in keep]
    contract = [lab for lab in la if lab in lb and lab not in keep]
    a_own = [lab for lab in la if lab not in lb]
    b_own = [lab for lab in lb if lab not in la]
    if not contract:                   # nothing to sum: a broadcast product
        order = la + b_own
        bb = _permuted(b, lb, [lab for lab in order if lab in lb])
        for i, lab in enumerate(order):
            if lab not in lb:
                bb = bb.unsqueeze(i)
        for _ in b_own:
            a = a.unsqueeze(-1)
        return a * bb, order

    def n(labs):
        p = 1
        for lab in labs:
            p *= sizes[lab]
        return p

    def full(t, labels, order):
        t = _permuted(t, labels, order)
        want = [sizes[lab] for lab in order]
        return t if list(t.shape) == want else t.expand(want)

    a3 = full(a, la, batch + a_own + contract).reshape(n(batch), n(a_own), n(contract))
    b3 = full(b, lb, batch + contract + b_own).reshape(n(batch), n(contract), n(b_own))
    out = batch + a_own + b_own
    return a3.bmm(b3).reshape([sizes[lab] for lab in out]), out


def einsum(*args: str | Tensor | list | tuple) -> Tensor:
    """Einstein summation over operands (an equation string, or PyTorch's sublist form), as
    torch.einsum; computed as permutes, reshapes and one batched matmul per pair of
    operands."""
    if args and not isinstance(args[0], str):
        equation, operands = _sublist_equation(args)
    else:
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    if len(operands) > 1:           # (PyTorch's einsum of one operand has no bmm to lower)
        operands = list(autocast_lower(*operands))
    for o in operands:
        if not isinstance(o, Tensor):
            raise TypeError(f"einsum(): argument 'operands' must be tuple of Tensors, not "
                            f"{type(o).__name__}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                           "equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                           "equation")
    starts = [sum(len(t) + 1 for t in terms[:k]) for k in range(len(terms))]
    ops = [_diagonals(t, _parse(term, t.ndim, k, at), k)
           for k, (t, term, at) in enumerate(zip(operands, terms, starts))]
    sizes = _sizes(ops)
    ell = max((lab[1] + 1 for _, ls in ops for lab in ls if isinstance(lab, tuple)), default=0)
    ell_labels = [("...", ell - 1 - j) for j in range(ell)]
    if arrow:
        out = []
        for c in rhs.replace("...", "."):
            labs = ell_labels if c == "." else [c]
            for lab in labs:
                if lab not in sizes:
                    raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                       "equation for any input operand")
                if lab in out:
                    raise RuntimeError(f"einsum(): output subscript {c} appears more than once "
                                       "in the output")
                out.append(lab)
    else:                              # implicit: the ellipsis, then the subscripts seen once
        counts = {}
        for term in terms:
            for c in term.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ell_labels + sorted(c for c, m in counts.items() if m == 1)
    # subscripts of one operand only, not in the output: summed at once
    summed = []
    for k, (t, labels) in enumerate(ops):
        others = set(out).union(*[set(ls) for j, (_, ls) in enumerate(ops) if j != k])
        summed.append(_sum_out(t, labels, others))
    t, labels = summed[0]
    for k in range(1, len(summed)):
        keep = set(out).union(*[set(ls) for _, ls in summed[k + 1:]])
        t, labels = _pair(t, labels, *summed[k], keep, sizes)
        t, labels = _sum_out(t, labels, keep)
    t, labels = _sum_out(t, labels, set(out))
    if len(ops) == 1 and t is ops[0][0]:    # nothing summed: PyTorch's result is a permute
        t = t.permute([labels.index(lab) for lab in out])
    else:
        t = _permuted(t, labels, out)
    want = [sizes[lab] for lab in out]
    if list(t.shape) != want:
        return t.expand(want)
    if len(ops) > 1 and any(lab not in out for _, ls in ops for lab in ls):
        # (PyTorch's last step when subscripts were summed: a view dropping their size-1
        # dims, so its result's node is a ViewBackward0 however the pairs were combined)
        return t.view(want)
    return t
