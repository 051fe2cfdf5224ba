"""A method of the op table given one operand more than it takes raises PyTorch's TypeError:
the extra tensor reached NumPy's impl as its `out=` and was silently written
(`x.exp(y)` put exp(x) into y)."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import OPS

METHODS = sorted({(name, op_name) for op_name, op in OPS.items()
                  for name in op.methods + op.inplace})


@pytest.mark.parametrize("name,op_name", METHODS)
def test_an_extra_operand_raises_and_writes_nothing(name, op_name):
    x, y = llgrad.ones(3), llgrad.zeros(3)
    method = getattr(llgrad.Tensor, name)
    if getattr(method, "__wrapped__", None) is not None or name.startswith("_"):
        pytest.skip("not the generic method")
    extra = (y,) * len(OPS[op_name].args)
    with pytest.raises(TypeError, match="takes"):
        method(x, *extra)
    np.testing.assert_array_equal(y.numpy(), np.zeros(3, np.float32))


def test_torch_functions_of_the_table_raise_too():
    x, y = llgrad.ones(3), llgrad.zeros(3)
    for fn in (llgrad.exp, llgrad.sin, llgrad.isnan, llgrad.sqrt):
        with pytest.raises(TypeError):
            fn(x, y)
    np.testing.assert_array_equal(y.numpy(), np.zeros(3, np.float32))
