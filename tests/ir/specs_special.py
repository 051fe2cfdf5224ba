# Samples of the inverse trigonometric and special functions (llgrad/ir/ops_special.py) and the
# bitwise ops (llgrad/ir/ops_bitwise.py), exec'd in test_ir_core.py's namespace (S, T, X, P, I,
# SPECS, llgrad, ...): each adds to SPECS.
def _U(*shape):
    return T(shape, gen="unit")              # [0, 1): asin, acos, erfinv


def _K(*shape, dtype="int64"):
    return T(shape, dtype, "int", 70)        # [0, 70): shift amounts past the width too


for _n in ("asin", "acos", "erfinv"):
    SPECS[_n] = S([_U(3, 4)], {}, (lambda n: lambda a: getattr(a, n)())(_n))
for _n in ("atan", "erfc"):
    SPECS[_n] = S([X(3, 4)], {}, (lambda n: lambda a: getattr(a, n)())(_n))
for _n in ("lgamma", "digamma"):
    SPECS[_n] = S([P(3, 4)], {}, (lambda n: lambda a: getattr(a, n)())(_n))
SPECS.update({
    "atan2": S([X(3, 4), X(4)], {}, lambda a, b: a.atan2(b)),
    "fmod_float": S([X(3, 4), X(4)], {}, lambda a, b: a.fmod(b)),
    "remainder_float": S([X(3, 4), X(4)], {}, lambda a, b: a % b),
    "polygamma": S([P(3, 4)], {"n": 2}, lambda a: a.polygamma(2)),
    "polygamma_": S([P(3, 4)], {"n": 1}, lambda a: a.clone().polygamma_(1)),
    "bitwise_and": S([_K(3, 4), _K(4)], {}, lambda a, b: a & b),
    "bitwise_or": S([_K(3, 4), _K(3, 4, dtype="int32")], {}, lambda a, b: a | b),
    "bitwise_xor": S([_K(3, 4), 5], {}, lambda a, b: a ^ b),
    "bitwise_not": S([_K(3, 4)], {}, lambda a: ~a),
    "bitwise_left_shift": S([_K(3, 4), _K(3, 4)], {}, lambda a, b: a << b),
    "bitwise_right_shift": S([_K(3, 4), 3], {}, lambda a, b: a >> b),
    "gcd": S([_K(3, 4), _K(3, 4)], {}, lambda a, b: a.gcd(b)),
    "lcm": S([_K(3, 4), _K(4)], {}, lambda a, b: a.lcm(b)),
    "div_int": S([_K(3, 4), 7], {"rounding_mode": "trunc"},
                 lambda a, b: a.div(b, rounding_mode="trunc")),
})


def _Uf(*shape):
    return T(shape, "float64", "unit")       # float64 draws in [0, 1)


def _eager_ints(ints, fill):
    """fill() with the generator's integer draw (torch_random.randint) replaced by `ints`,
    as _eager_replay replaces the uniform and normal draws."""
    saved = torch_random.randint
    torch_random.randint = lambda state, n, low, high, dtype: ints.numpy().reshape(-1)
    try:
        return fill()
    finally:
        torch_random.randint = saved


SPECS.update({
    # random fills (ops_fill_more.py): the op maps its draw operand; eager's public fill draws
    # the same numbers (replayed) and must map them alike
    "random_": S([X(3, 4), _K(3, 4)], {"low": -3, "high": 5, "form": "from_to"},
                 lambda a, k: _eager_ints(k, lambda: _dense(a).random_(-3, 5))),
    "exponential": S([X(3, 4), _Uf(3, 4)], {"lambd": 2.0},
                     lambda a, u: _eager_replay(u, lambda: _dense(a).exponential_(2.0))),
    "geometric": S([X(3, 4), _Uf(3, 4)], {"p": 0.3},
                   lambda a, u: _eager_replay(u, lambda: _dense(a).geometric_(0.3))),
    "log_normal": S([X(3, 4), X(3, 4, dtype="float64")], {"mean": 0.5, "std": 0.25},
                    lambda a, n: _eager_replay(n, lambda: _dense(a).log_normal_(0.5, 0.25))),
    "cauchy": S([X(3, 4), _Uf(3, 4)], {"median": 1.0, "sigma": 2.0},
                lambda a, u: _eager_replay(u, lambda: _dense(a).cauchy_(1.0, 2.0))),
    "normal_tensor": S([X(3, 4), P(4), X(3, 4)], {},
                       lambda m, s, n: _eager_replay(n, lambda: llgrad.normal(m, s))),
})


class _Square(T):
    """3 I + noise: well-conditioned square matrices."""

    def make(self, shape, rng):
        return (rng.uniform(-1, 1, shape) + 3 * np.eye(*shape[-2:])).astype(self.dtype)


class _Pivots(T):
    """LAPACK's 1-based pivots of 3 x 3 LU factorisations: row j swapped with one at or below."""

    def make(self, shape, rng):
        return rng.integers(np.arange(1, 4), 4).astype(self.dtype)


SPECS.update({
    "linalg_inv_ex": S([_Square((2, 3, 3), "float64")], {},
                        lambda a: (a.inverse(), llgrad.zeros(2, dtype=llgrad.int32))),
    "linalg_det": S([_Square((2, 3, 3), "float64")], {}, lambda a: a.det()),
    "linalg_slogdet": S([_Square((3, 3), "float64")], {}, lambda a: tuple(a.slogdet())),
    # (ops_linalg_solve.py, ops_linalg_spectral.py)
    "linalg_solve_ex": S([_Square((2, 3, 3), "float64"), X(2, 3, 2, dtype="float64")],
                         {"left": True, "vector": False},
                         lambda a, b: tuple(llgrad.linalg.solve_ex(a, b))),
    "linalg_solve_triangular": S([_Square((3, 3), "float64"), X(3, 2, dtype="float64")],
                                 {"upper": True, "left": True, "unitriangular": False},
                                 lambda a, b: llgrad.linalg.solve_triangular(a, b, upper=True)),
    "cholesky_solve": S([X(2, 3, 2, dtype="float64"), _Square((3, 3), "float64")],
                        {"upper": False}, lambda b, a: llgrad.cholesky_solve(b, a)),
    "linalg_cholesky_ex": S([_Square((3, 3), "float64")], {"upper": False},
                            lambda a: tuple(llgrad.linalg.cholesky_ex(a))),
    "linalg_lu_factor_ex": S([_Square((2, 3, 3), "float64")], {"pivot": True},
                             lambda a: tuple(llgrad.linalg.lu_factor_ex(a))),
    "lu_pivots_to_permutation": S([_Pivots((3,), "int32")], {"m": 3},
                                  lambda p: p._op("lu_pivots_to_permutation", m=3),
                                  layouts=("contiguous",)),
    "linalg_matrix_exp": S([X(2, 3, 3, dtype="float64")], {}, lambda a: a.matrix_exp()),
    "linalg_qr": S([X(4, 3, dtype="float64")], {"mode": "reduced"},
                   lambda a: tuple(llgrad.linalg.qr(a))),
    "linalg_svd": S([X(3, 4, dtype="float64")], {"full_matrices": True, "compute_uv": True},
                    lambda a: tuple(llgrad.linalg.svd(a))),
    "linalg_eigh": S([_Square((3, 3), "float64")], {"UPLO": "L", "compute_v": True},
                     lambda a: tuple(llgrad.linalg.eigh(a))),
})
SPECS.update({
    "xlogy_float": S([X(3, 4), P(4)], {}, lambda a, b: a.xlogy(b)),
    "xlog1py_float": S([X(3, 4), P(3, 4)], {}, lambda a, b: llgrad.special.xlog1py(a, b)),
    "entr": S([P(3, 4)], {}, lambda a: llgrad.special.entr(a)),
})
