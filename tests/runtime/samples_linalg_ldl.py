# The LDL^T ops (llgrad/ir/ops_linalg_ldl.py): PyTorch gives neither a derivative (a backward
# through them raises its error), so they are exempt, with samples of their float results.
EXEMPT["linalg_ldl_factor_ex"] = Exempt(  # noqa: F821
    "LAPACK's sytrf (PyTorch: derivative for aten::linalg_ldl_factor_ex is not implemented)",
    lambda T, x: T.linalg.ldl_factor_ex(x.detach() + x.detach().mT).LD, (R(2, 2),))  # noqa: F821
EXEMPT["linalg_ldl_solve"] = Exempt(  # noqa: F821
    "LAPACK's sytrs (PyTorch: derivative for aten::linalg_ldl_solve is not implemented)",
    lambda T, x: T.linalg.ldl_solve(*T.linalg.ldl_factor_ex(x.detach() + x.detach().mT)[:2],
                                    x.detach()), (R(2, 2),))  # noqa: F821
FLOAT_WITHOUT_DERIVATIVE.update(("linalg_ldl_factor_ex", "linalg_ldl_solve"))  # noqa: F821
