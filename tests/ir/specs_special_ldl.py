# The LDL^T ops (llgrad/ir/ops_linalg_ldl.py): run in test_ir_core's namespace after
# specs_special.py (its _Square and _Pivots: 1x1 Bunch-Kaufman pivots are LU-style ones).
SPECS.update({  # noqa: F821
    "linalg_ldl_factor_ex": S([_Square((2, 3, 3), "float64")], {"hermitian": False},  # noqa: F821
                              lambda a: tuple(llgrad.linalg.ldl_factor_ex(a))),  # noqa: F821
    "linalg_ldl_solve": S([_Square((3, 3), "float64"), _Pivots((3,), "int32"),  # noqa: F821
                           X(3, 2, dtype="float64")], {"hermitian": False},  # noqa: F821
                          lambda ld, p, b: llgrad.linalg.ldl_solve(ld, p, b),  # noqa: F821
                          layouts=("contiguous",)),
})
