# Samples of the tensor ops of issue 21 (llgrad/ir/ops_tensor.py, ops_linalg.py, ops_sort.py,
# ops_fill.py). Exec'd in tests/runtime/test_optable.py's namespace (S, Case, R_, NZ_, K, I,
# ...): see that file for what each sample is run through.

_RANDOM = "random draws: llgrad's generator is not PyTorch's (compared with eager instead)"
_DRAWS = "random draws: every call draws anew, so finite differences see noise"
_TIES = "equal values (rounded): a finite difference's step breaks the tie"


def _away(lo, hi, step):
    """Values on a grid of `step` shifted by at most a quarter step: no rounding boundary
    (of ceil/trunc/frac/round(decimals)) within eps."""
    def make(*shape):
        grid = np.round(R_(*shape, lo=lo, hi=hi) / step) * step
        return grid + R_(*shape, lo=-0.25 * step, hi=0.25 * step) + 0.5 * step
    return make


def _sr(reduce, include_self=True):
    return lambda T, x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self)


_SIDX = I([0, 0, 1], [2, 3, 3], [1, 1, 1])          # repeated positions along dim 1
_UIDX = I([0, 2], [3, 1], [1, 0])                    # distinct positions per row

# -- positional --
S("tril",
  Case("plain", lambda T, x: x.tril(), R_(3, 4), node="TrilBackward0"),
  Case("diag_fn_3d", lambda T, x: T.tril(x, -1), R_(2, 3, 4), node="TrilBackward0"),
  Case("noncontig_inplace", lambda T, x: x.t().clone().tril_(1), R_(4, 3),
       node="TrilBackward0"))
S("triu",
  Case("plain", lambda T, x: x.triu(), R_(3, 4), node="TriuBackward0"),
  Case("diag_fn", lambda T, x: T.triu(x.t(), 2), R_(4, 3), node="TriuBackward0"))
S("flip",
  Case("both", lambda T, x: x.flip(0, 1), R_(3, 4), node="FlipBackward0"),
  Case("fn_last_3d", lambda T, x: T.flip(x, [-1]), R_(2, 3, 4), node="FlipBackward0"),
  Case("fliplr_noncontig", lambda T, x: x.t().fliplr(), R_(4, 3), node="FlipBackward0"))
S("roll",
  Case("flat", lambda T, x: x.roll(5), R_(3, 4), node="RollBackward0"),
  Case("dims", lambda T, x: x.roll((1, -2), (0, 1)), R_(3, 4), node="RollBackward0"),
  Case("fn_flat_noncontig", lambda T, x: T.roll(x.t(), -2), R_(3, 4), node="RollBackward0"),
  Case("fn_dim", lambda T, x: T.roll(x, 4, 1), R_(2, 3), node="RollBackward0"))
S("repeat",
  Case("more_dims", lambda T, x: x.repeat(2, 1, 3), R_(3, 4), node="RepeatBackward0"),
  Case("same_dims_noncontig", lambda T, x: x.t().repeat(1, 2), R_(3, 2),
       node="RepeatBackward0"),
  Case("vector", lambda T, x: x.repeat(3), R_(2), node="RepeatBackward0"))
S("diag_embed",
  Case("diag_vector", lambda T, v: T.diag(v), R_(4), node="DiagEmbedBackward0"),
  Case("diag_offset", lambda T, v: T.diag(v, -1), R_(3), node="DiagEmbedBackward0"),
  Case("embed_dims", lambda T, x: T.diag_embed(x, 1, 0, 2), R_(2, 3), node="DiagEmbedBackward0"),
  Case("embed_noncontig", lambda T, x: x.t().diag_embed(), R_(3, 2), node="DiagEmbedBackward0"))
S("diagonal_copy",
  Case("diag_matrix", lambda T, m: T.diag(m), R_(3, 4), node="DiagonalBackward0_copy"),
  Case("diag_offset_noncontig", lambda T, m: m.t().diag(1), R_(3, 4),
       node="DiagonalBackward0_copy"))
S("unfold",
  Case("overlapping", lambda T, x: x.unfold(1, 2, 1), R_(3, 4), node="UnfoldBackward0"),
  Case("strided_noncontig", lambda T, x: x.t().unfold(0, 2, 2) * 2, R_(3, 5),
       node="MulBackward0", top=False),
  Case("vector", lambda T, x: x.unfold(0, 3, 2), R_(7), node="UnfoldBackward0"))
S("cumprod",
  Case("dim1", lambda T, x: x.cumprod(1), NZ_(3, 4), node="CumprodBackward0"),
  Case("fn_dim0_noncontig", lambda T, x: T.cumprod(x.t(), 0), NZ_(3, 4),
       node="CumprodBackward0"),
  Case("zeros", lambda T, x: x.cumprod(1), np.array([[1.5, 0.0, 2.0, -0.5], [0.0, 3.0, 0.0, 2.0],
                                                    [2.0, -2.0, 0.5, 0.0]]),
       node="CumprodBackward0"))
S("baddbmm",
  Case("plain", lambda T, x, a, b: T.baddbmm(x, a, b), R_(2, 3, 5), R_(2, 3, 4), R_(2, 4, 5),
       node="BaddbmmBackward0"),
  Case("bcast_scaled", lambda T, x, a, b: x.baddbmm(a, b.transpose(1, 2), beta=0.5, alpha=-2.0),
       R_(3, 1), R_(2, 3, 4), R_(2, 5, 4), node="BaddbmmBackward0"),
  Case("inplace", lambda T, x, a, b: (x * 1).baddbmm_(a, b, alpha=0.5), R_(2, 2, 3),
       R_(2, 2, 4), R_(2, 4, 3), node="BaddbmmBackward0"))

# -- rounding --
_STEPS = _away(-3, 3, 1.0)
S("ceil",
  Case("plain", lambda T, x: x.ceil(), _STEPS(2, 3), node="CeilBackward0"),
  Case("noncontig_fn", lambda T, x: T.ceil(x.t()[:, ::2]), _STEPS(3, 4), node="CeilBackward0"),
  Case("inplace", lambda T, x: (x * 1).ceil_(), _STEPS(2, 3), node="CeilBackward0"))
S("trunc",
  Case("plain", lambda T, x: T.trunc(x), _STEPS(2, 3), node="TruncBackward0"),
  Case("fix_noncontig", lambda T, x: x.t().fix(), _STEPS(3, 4), node="TruncBackward0"),
  Case("inplace", lambda T, x: (x * 1).fix_(), _STEPS(), node="TruncBackward0"))
S("frac",
  Case("plain", lambda T, x: x.frac(), _STEPS(2, 3), node="FracBackward0"),
  Case("noncontig_fn", lambda T, x: T.frac(x.t()), _STEPS(3, 4), node="FracBackward0"),
  Case("inplace", lambda T, x: (x * 1).frac_(), _STEPS(2, 3), node="FracBackward0"))
S("round_decimals",
  Case("two", lambda T, x: x.round(decimals=2), _away(-3, 3, 0.01)(3, 4), node="RoundBackward1"),
  Case("negative_fn", lambda T, x: T.round(x.t(), decimals=-1), _away(-40, 40, 10.0)(3, 4),
       node="RoundBackward1"),
  Case("inplace", lambda T, x: (x * 1).round_(decimals=1), _away(-3, 3, 0.1)(2, 3),
       node="RoundBackward1"))

# -- norms --
S("linalg_vector_norm",
  Case("norm", lambda T, x: x.norm(), R_(3, 4), node="LinalgVectorNormBackward0"),
  Case("p1_dim", lambda T, x: T.norm(x, p=1, dim=1), NZ_(3, 4), node="LinalgVectorNormBackward0"),
  Case("p3_keepdim", lambda T, x: T.norm(x.t(), 3, 0, keepdim=True), NZ_(3, 4),
       node="LinalgVectorNormBackward0"),
  Case("inf", lambda T, x: T.linalg.vector_norm(x, float("inf"), dim=-1), R_(3, 4),
       node="LinalgVectorNormBackward0"),
  Case("neg_inf_all", lambda T, x: T.linalg.vector_norm(x, -float("inf")), R_(3, 4),
       node="LinalgVectorNormBackward0"),
  Case("zero", lambda T, x: T.linalg.vector_norm(x, 0, dim=0), R_(3, 4),
       node="LinalgVectorNormBackward0"),
  Case("half", lambda T, x: T.linalg.vector_norm(x, 0.5, dim=(0, 1)), NZ_(3, 4),
       node="LinalgVectorNormBackward0"),
  Case("p1_5", lambda T, x: T.linalg.vector_norm(x, 1.5, dim=1), NZ_(3, 4),
       node="LinalgVectorNormBackward0"),
  Case("matrix_fro", lambda T, x: T.linalg.matrix_norm(x), R_(2, 3, 4),
       node="LinalgVectorNormBackward0"),
  Case("matrix_inf", lambda T, x: T.linalg.matrix_norm(x, float("inf")), NZ_(3, 4),
       node="AmaxBackward0", top=False),
  Case("zero_row", lambda T, x: x.norm(dim=1), np.array([[0.0, 0.0], [0.6, -0.8]]),
       node="LinalgVectorNormBackward0", gradcheck=_KINK))

# -- sorting and scattering --
S("sort",
  Case("dim1", lambda T, x: tuple(x.sort(1)), R_(3, 4), node="SortBackward0"),
  Case("descending_fn", lambda T, x: T.sort(x, 0, descending=True).values, R_(3, 4),
       node="SortBackward0"),
  Case("noncontig_stable", lambda T, x: tuple(x.t().sort(stable=True)), R_(5, 3),
       node="SortBackward1"),
  Case("long_row", lambda T, x: x.sort(-1).values, R_(2, 37), node="SortBackward0"))
S("topk",
  Case("largest", lambda T, x: tuple(x.topk(2)), R_(3, 4), node="TopkBackward0"),
  Case("smallest_dim0", lambda T, x: T.topk(x, 2, dim=0, largest=False).values, R_(3, 4),
       node="TopkBackward0"),
  Case("noncontig", lambda T, x: x.t().topk(3)[0], R_(5, 3), node="TopkBackward0"),
  Case("ties_unsorted", lambda T, x: tuple(x.round().topk(3, sorted=False)), R_(3, 9) * 2,
       node="TopkBackward0", gradcheck=_TIES))
S("kthvalue",
  Case("dim1", lambda T, x: tuple(x.kthvalue(2, 1)), R_(3, 4), node="KthvalueBackward0",
       top=False),   # (keepdim=False: a squeeze of the op's result, renamed)
  Case("keepdim_dim0", lambda T, x: x.t().kthvalue(3, 0, keepdim=True).values, R_(4, 5),
       node="KthvalueBackward0"),
  Case("ties", lambda T, x: tuple(x.round().kthvalue(4)), R_(2, 9) * 2,
       node="KthvalueBackward0", gradcheck=_TIES, top=False))
S("mode",
  Case("ties_long_row", lambda T, x: tuple(x.round().mode(1)), R_(2, 30) * 2,
       node="ModeBackward0", gradcheck=_TIES, top=False),
  Case("dim0_keepdim", lambda T, x: x.round().mode(0, keepdim=True).values, R_(5, 3) * 2,
       node="ModeBackward0", gradcheck=_TIES))
S("scatter",
  Case("src", lambda T, x, i, s: x.scatter(1, i, s), R_(3, 4), _UIDX, R_(3, 2),
       node="ScatterBackward0"),
  Case("value", lambda T, x, i: T.scatter(x, 1, i, 2.5), R_(3, 4), _UIDX,
       node="ScatterBackward1"),
  Case("inplace_dim0", lambda T, x, s: (x * 1).scatter_(0, T.tensor([[2, 0, 1, 0]]), s),
       R_(3, 4), R_(1, 4), node="ScatterBackward0"),
  Case("noncontig", lambda T, x, i, s: x.t().scatter(1, i, s.t()), R_(4, 3), _UIDX, R_(2, 3),
       node="ScatterBackward0"))
S("scatter_reduce",
  Case("sum", _sr("sum"), R_(3, 4), _SIDX, R_(3, 3), node="ScatterReduceBackward0"),
  Case("sum_exclude", _sr("sum", False), R_(3, 4), _SIDX, R_(3, 3),
       node="ScatterReduceBackward0"),
  Case("prod", _sr("prod"), NZ_(3, 4), _SIDX, NZ_(3, 3), node="ScatterReduceBackward0"),
  Case("prod_exclude", _sr("prod", False), NZ_(3, 4), _SIDX, NZ_(3, 3),
       node="ScatterReduceBackward0"),
  Case("prod_zero", _sr("prod"), NZ_(3, 4), _SIDX, np.array([[0.0, 1.5, 2.0], [1.2, 0.0, 0.7],
                                                            [-0.5, 0.0, 1.1]]),
       node="ScatterReduceBackward0", gradgrad="PyTorch leaves double backward through a "
                                                "zero of prod undefined"),
  Case("mean", _sr("mean"), R_(3, 4), _SIDX, R_(3, 3), node="ScatterReduceBackward0"),
  Case("mean_exclude", _sr("mean", False), R_(3, 4), _SIDX, R_(3, 3),
       node="ScatterReduceBackward0"),
  Case("amax", _sr("amax"), R_(3, 4), _SIDX, R_(3, 3), node="ScatterReduceBackward0"),
  Case("amin_exclude", _sr("amin", False), R_(3, 4), _SIDX, R_(3, 3),
       node="ScatterReduceBackward0"),
  # (what scatter(0, i, 1.5, reduce="multiply") computes; that call has no derivative, as
  # PyTorch's: test_adversary_s72_b2.py)
  Case("legacy_multiply", lambda T, x, i: x.scatter_reduce(0, i, x.new_full(i.shape, 1.5),
                                                            "prod"), R_(3, 4),
       I([0, 2, 0, 0], [0, 1, 2, 2]), node="ScatterReduceBackward0"),
  Case("inplace_noncontig", lambda T, x, i, s: (x.t() * 1).scatter_reduce_(0, i, s, "amax"),
       R_(4, 3), I([0, 1, 0], [2, 1, 2]), R_(2, 3), node="ScatterReduceBackward0"))

# -- random fills: draws from llgrad's generator (test_trace_optable and the llvm tests
# compare them with eager's from the same generator state) --
S("uniform",
  Case("inplace", lambda T, x: (x * 1).uniform_(-2.0, 3.0), R_(3, 4), node="UniformBackward0",
       gradcheck=_DRAWS, torch=_RANDOM),
  Case("view", lambda T, x: _inplace_view(x * 1, lambda v: v[:, 1:].uniform_()), R_(3, 4),
       node="CopySlices", top=False, gradcheck=_DRAWS, torch=_RANDOM))
S("normal",
  Case("inplace", lambda T, x: (x * 1).normal_(0.5, 2.0), R_(3, 4), node="NormalBackward0",
       gradcheck=_DRAWS, torch=_RANDOM))
S("bernoulli_p",
  Case("number", lambda T, x: (x * 1).bernoulli_(0.5), R_(3, 4), node="BernoulliBackward2",
       gradcheck=_DRAWS, torch=_RANDOM),
  Case("tensor", lambda T, x, p: (x * 1).bernoulli_(p), R_(3, 4), K(R_(4, lo=0, hi=1)),
       node="BernoulliBackward1", gradcheck=_DRAWS, torch=_RANDOM))
S("bernoulli",
  Case("probs", lambda T, p: T.bernoulli(p.sigmoid()), R_(3, 4), node="BernoulliBackward0",
       gradcheck=_DRAWS, torch=_RANDOM))
