# Fuzz recipe of ctc_loss (exec'd in programs.py's namespace: Gen, _index_val, RECIPES,
# ...). Its backward op runs wherever the program's gradients are compared.


def r_ctc(g):
    """F.ctc_loss of a (T, N, C) float value's log_softmax: padded targets (N, S) drawn below
    the blank (the last class), every input length T and target lengths short enough for an
    alignment (at most T // 2: a finite loss), each reduction, zero_infinity sometimes."""
    x = g.need(lambda v: v.float and len(v.shape) == 3 and 0 not in v.shape
               and v.shape[2] >= 2)
    t, n, c = x.shape
    s = g.int(1, 3)
    tgt, uses = _index_val(g, (n, s), c - 1)
    lengths = [g.int(0, min(s, t // 2)) for _ in range(n)]
    red = g.choice(["mean", "sum", "none"])
    v = g.new((n,) if red == "none" else (), x.dtype, rg=x.rg)
    g.emit(f"{v} = F.ctc_loss({x}.log_softmax(2), {tgt}, {[t] * n!r}, {lengths!r}, "
           f"blank={c - 1}, reduction={red!r}, zero_infinity={g.chance(30)})", x, *uses)
    g.op("ctc_loss", "log_softmax")


RECIPES.update({
    r_ctc: (1, {"ctc_loss", "ctc_loss_backward"}),
})
