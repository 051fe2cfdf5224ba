# Samples of the inverse trigonometric and special functions (llgrad/ir/ops_special.py) and the
# bitwise ops (llgrad/ir/ops_bitwise.py, non-differentiable: EXEMPT), exec'd in
# test_optable.py's namespace (S, Case, K, I, EXEMPT, Exempt, unary, binary, ...), from a
# generator of their own (the other files' inputs stay as they were).
_sp_rng = np.random.default_rng(20270415)


def _spR(*shape):
    return np.asarray(_sp_rng.uniform(-2.0, 2.0, shape))


def _spU(*shape):
    """Inside (-1, 1), away from the ends (asin, acos, erfinv)."""
    return np.asarray(_sp_rng.uniform(-0.9, 0.9, shape))


def _spP(*shape):
    """Positive, away from 0 (lgamma, digamma, polygamma)."""
    return np.asarray(_sp_rng.uniform(0.3, 4.0, shape))


def _spNeg(*shape):
    """Negative, a quarter away from the poles at the integers."""
    return np.asarray(-_sp_rng.integers(0, 4, shape) - _sp_rng.uniform(0.25, 0.75, shape))


def _un(f, node, dom, inplace=None):
    """unary()'s cases, written here (a node's location must be this file's lines)."""
    cases = [Case("plain", lambda T, x: f(T, x), dom(2, 3), node=node),
             Case("noncontig", lambda T, x: f(T, x.t()[:, ::2]), dom(3, 4), node=node),
             Case("scalar0d", lambda T, x: f(T, x), dom(), node=node)]
    if inplace is not None:
        cases.append(Case("inplace", lambda T, x: inplace(x.clone()), dom(2, 3), node=node))
    return cases


def _bin(f, node, a, b, inplace):
    """binary()'s cases without a Python-number operand (atan2 takes none)."""
    return [Case("same", lambda T, x, y: f(x, y), a(3, 4), b(3, 4), node=node),
            Case("bcast", lambda T, x, y: f(x, y), a(3, 1), b(4), node=node),
            Case("bcast_lead", lambda T, x, y: f(x, y), a(2, 1, 3), b(4, 1), node=node),
            Case("noncontig", lambda T, x, y: f(x.t(), y[:, ::2]), a(4, 3), b(3, 8), node=node),
            Case("inplace", lambda T, x, y: inplace(x * 1, y), a(3, 4), b(4), node=node)]


# -- inverse trigonometric --
S("asin", *_un(lambda T, x: x.asin(), "AsinBackward0", _spU, inplace=lambda x: x.asin_()),
  Case("arcsin_fn", lambda T, x: T.arcsin(x), _spU(4), node="AsinBackward0"),
  Case("inplace_view", lambda T, x: _inplace_view(x * 1, lambda v: v[:, 1].arcsin_()),
       _spU(2, 3), node="CopySlices", top=False))
S("acos", *_un(lambda T, x: T.acos(x), "AcosBackward0", _spU,
                 inplace=lambda x: x.arccos_()),
  Case("arccos_method", lambda T, x: x.arccos(), _spU(3), node="AcosBackward0"))
S("atan", *_un(lambda T, x: x.atan(), "AtanBackward0", _spR, inplace=lambda x: x.atan_()),
  Case("arctan_fn_wide", lambda T, x: T.arctan(x * 10), _spR(5), node="AtanBackward0", top=False))
S("atan2", *_bin(lambda x, y: x.atan2(y), "Atan2Backward0", _spR, _spR,
                 lambda x, y: x.atan2_(y)),
  Case("fn", lambda T, y, x: T.atan2(y, x), _spR(2, 3), _spR(3), node="Atan2Backward0"),
  Case("arctan2", lambda T, y, x: T.arctan2(y, x), _spR(4), _spR(4), node="Atan2Backward0"),
  Case("f32_other", lambda T, y, x: y.arctan2(x), _spR(3), K(_spR(3).astype(np.float32)),
       node="Atan2Backward0"),
  Case("inplace_arctan2_", lambda T, y, x: (y * 1).arctan2_(x), _spR(2, 3), _spR(2, 3),
       node="Atan2Backward0"))

# -- erfc, erfinv --
S("erfc", *_un(lambda T, x: x.erfc(), "ErfcBackward0", _spR, inplace=lambda x: x.erfc_()),
  Case("fn_tail", lambda T, x: T.erfc(x * 3), _spP(4), node="ErfcBackward0", top=False))
S("erfinv", *_un(lambda T, x: x.erfinv(), "ErfinvBackward0", _spU,
                   inplace=lambda x: x.erfinv_()),
  Case("fn", lambda T, x: T.erfinv(x), _spU(2, 2), node="ErfinvBackward0"))

# -- the gamma family --
S("lgamma", *_un(lambda T, x: x.lgamma(), "LgammaBackward0", _spP,
                   inplace=lambda x: x.lgamma_()),
  Case("negative", lambda T, x: T.lgamma(x), _spNeg(2, 3), node="LgammaBackward0"),
  Case("large", lambda T, x: (x * 20).lgamma(), _spP(4), node="LgammaBackward0"))
S("digamma", *_un(lambda T, x: x.digamma(), "DigammaBackward0", _spP,
                    inplace=lambda x: x.digamma_()),
  Case("negative", lambda T, x: T.digamma(x), _spNeg(2, 3), node="DigammaBackward0"),
  Case("large", lambda T, x: (x * 20).digamma(), _spP(4), node="DigammaBackward0"))
S("polygamma",
  Case("n1", lambda T, x: T.polygamma(1, x), _spP(2, 3), node="PolygammaBackward0"),
  Case("n0", lambda T, x: T.polygamma(0, x), _spP(3), node="PolygammaBackward0"),
  Case("n2_method_noncontig", lambda T, x: x.t().polygamma(2), _spP(3, 2),
       node="PolygammaBackward0"),
  Case("n1_negative", lambda T, x: x.polygamma(1), _spNeg(4), node="PolygammaBackward0"))
S("polygamma_",
  Case("n3", lambda T, x: (x * 1).polygamma_(3), _spP(2, 2), node="PolygammaBackward1"),
  Case("n1_view", lambda T, x: _inplace_view(x * 1, lambda v: v[1:].polygamma_(1)), _spP(3, 2),
       node="CopySlices", top=False))

# -- bitwise (integer results of integer operands: no gradient) --
_BITS = "integer result (bitwise: PyTorch defines no gradient)"
_SHIFTS = I(-1, 0, 3, 63, 64, 70)                   # out-of-range amounts give 0 / the sign
EXEMPT.update({
    "bitwise_and": Exempt(_BITS, lambda T, x, i: (x > 0).long() * 7 & i, (_spR(6), _SHIFTS)),
    "bitwise_or": Exempt(_BITS, lambda T, x, i: T.bitwise_or(i, (x > 0).long()),
                         (_spR(6), _SHIFTS)),
    "bitwise_xor": Exempt(_BITS, lambda T, x, i: i.bitwise_xor((x < 0).long() * 5),
                          (_spR(6), _SHIFTS)),
    "bitwise_not": Exempt(_BITS, lambda T, x: ~((x > 0).long() * 3), (_spR(5),)),
    "bitwise_left_shift": Exempt(_BITS, lambda T, x, i: ((x > 0).long() * 2 - 1) << i,
                                 (_spR(6), _SHIFTS)),
    "bitwise_right_shift": Exempt(_BITS, lambda T, x, i: T.bitwise_right_shift(
        (x > 0).long() * 2000 - 1000, i), (_spR(6), _SHIFTS)),
    "gcd": Exempt(_BITS, lambda T, x, i: T.gcd((x > 0).long() * 12 - 6, i), (_spR(6), _SHIFTS)),
    "lcm": Exempt(_BITS, lambda T, x, i: (x < 0).long().mul(4).add(-2).lcm(i),
                  (_spR(6), _SHIFTS)),
    "div_int": Exempt("integer result (integer division: PyTorch defines no gradient)",
                      lambda T, x, i: (i * 7 + 2).div((x > 0).long() * 2 - 3,
                                                      rounding_mode="trunc") + i // -3,
                      (_spR(6), _SHIFTS)),
})

# -- more random fills (llgrad/ir/ops_fill_more.py): draws from llgrad's generator --
_RND = "random draws: llgrad's generator is not PyTorch's (compared with eager instead)"
_DRW = "random draws: every call draws anew, so finite differences see noise"
S("random_",
  Case("default", lambda T, x: (x * 1).random_(), _spR(3, 4), node="RandomBackward2",
       gradcheck=_DRW, torch=_RND),
  Case("to", lambda T, x: (x * 1).random_(7), _spR(3, 4), node="RandomBackward1",
       gradcheck=_DRW, torch=_RND),
  Case("from_to_view", lambda T, x: _inplace_view(x * 1, lambda v: v[1:].random_(-3, 5)),
       _spR(3, 4), node="CopySlices", top=False, gradcheck=_DRW, torch=_RND))
S("exponential",
  Case("inplace", lambda T, x: (x * 1).exponential_(2.0), _spR(3, 4),
       node="ExponentialBackward0", gradcheck=_DRW, torch=_RND))
S("geometric",
  Case("inplace", lambda T, x: (x * 1).geometric_(0.3), _spR(3, 4), node="GeometricBackward0",
       gradcheck=_DRW, torch=_RND))
S("log_normal",
  Case("inplace", lambda T, x: (x * 1).log_normal_(0.5, 0.25), _spR(3, 4),
       node="LogNormalBackward0", gradcheck=_DRW, torch=_RND))
S("cauchy",
  Case("inplace", lambda T, x: (x * 1).cauchy_(1.0, 2.0), _spR(3, 4), node="CauchyBackward0",
       gradcheck=_DRW, torch=_RND))
S("normal_tensor",              # (std's abs: special values feed it, and a negative one raises)
  Case("both", lambda T, m, s: T.normal(m, s.abs()), _spR(3, 4), _spP(4), node="NormalBackward3",
       gradcheck=_DRW, torch=_RND),
  Case("mean", lambda T, m: T.normal(m, 2.0), _spR(3, 4), node="NormalBackward1",
       gradcheck=_DRW, torch=_RND),
  Case("std", lambda T, s: T.normal(0.5, s.abs()), _spP(2, 3), node="NormalBackward2",
       gradcheck=_DRW, torch=_RND))

# -- square matrices (llgrad/ir/ops_matrix.py: no native lowering, run on the interpreter).
# The inputs are flat (reshaped in the program): a broadcast layout would make them singular


def _spM(*shape):
    """Well-conditioned square matrices (the identity times 3 plus noise), flattened."""
    return np.asarray(_sp_rng.uniform(-1, 1, shape) + 3 * np.eye(shape[-1])).reshape(-1)


S("linalg_inv_ex",
  Case("plain", lambda T, a: T.inverse(a.reshape(3, 3)), _spM(3, 3), node="LinalgInvExBackward0"),
  Case("batched_method", lambda T, a: a.reshape(2, 3, 3).inverse(), _spM(2, 3, 3),
       node="LinalgInvExBackward0"),
  Case("noncontig_linalg", lambda T, a: T.linalg.inv(a.reshape(4, 4).mT), _spM(4, 4),
       node="LinalgInvExBackward0"))
S("linalg_det",
  Case("plain", lambda T, a: T.det(a.reshape(3, 3)), _spM(3, 3), node="LinalgDetBackward0"),
  Case("batched_method", lambda T, a: a.reshape(2, 2, 2).det(), _spM(2, 2, 2),
       node="LinalgDetBackward0"),
  Case("linalg_noncontig", lambda T, a: T.linalg.det(a.reshape(3, 3).mT * -1), _spM(3, 3),
       node="LinalgDetBackward0"))
S("linalg_slogdet",
  Case("logabsdet", lambda T, a: T.slogdet(a.reshape(3, 3)).logabsdet, _spM(3, 3),
       node="LinalgSlogdetBackward0"),
  Case("batched_negative", lambda T, a: T.linalg.slogdet(-a.reshape(2, 3, 3))[1],
       _spM(2, 3, 3), node="LinalgSlogdetBackward0"),
  Case("logdet", lambda T, a: T.logdet(a.reshape(3, 3)), _spM(3, 3), node="WhereBackward0",
       top=False))

# -- fmod / remainder of floats (C's fmod, exact; appended: the inputs above stay as they were)
# (the in-place forms compute out of place and copy in: their top node is the copy)
S("fmod_float", *_bin(lambda x, y: x.fmod(y), "FmodBackward1", _spR, _spR, None)[:-1],
  Case("fn", lambda T, x, y: T.fmod(x, y), _spR(2, 3), _spR(3), node="FmodBackward1"),
  Case("inplace", lambda T, x, y: (x * 1).fmod_(y), _spR(3, 4), _spR(4), node="FmodBackward1",
       top=False))
S("remainder_float", *_bin(lambda x, y: x % y, "RemainderBackward1", _spR, _spR, None)[:-1],
  Case("fn", lambda T, x, y: T.remainder(x, y), _spR(2, 3), _spR(3),
       node="RemainderBackward1"),
  Case("inplace", lambda T, x, y: (x * 1).remainder_(y), _spR(3, 4), _spR(4),
       node="RemainderBackward1", top=False))

# xlogy / xlog1py / entr: one op each (PyTorch's gradients at 0 too: tests/runtime/
# test_torch_adversary_sweep59.py); log's domain here, its edges there
S("xlogy_float", *_bin(lambda x, y: x.xlogy(y), "XlogyBackward0", _spR, _spP, None)[:-1],
  Case("inplace", lambda T, x, y: (x * 1).xlogy_(y), _spR(3, 4), _spP(4), node="XlogyBackward0",
       top=False),
  Case("number_self", lambda T, y: T.xlogy(2.5, y), _spP(3), node="XlogyBackward1"),
  Case("number_other", lambda T, x: T.special.xlogy(x, 3.0), _spR(3), node="XlogyBackward2"))
S("xlog1py_float",
  Case("same", lambda T, x, y: T.special.xlog1py(x, y), _spR(3, 4), _spP(3, 4),
       node="SpecialXlog1PyBackward0"),
  Case("bcast_noncontig", lambda T, x, y: T.special.xlog1py(x.t(), y), _spR(4, 3), _spP(4),
       node="SpecialXlog1PyBackward0"))
S("entr", *_un(lambda T, x: T.special.entr(x), "SpecialEntrBackward0", _spP))
