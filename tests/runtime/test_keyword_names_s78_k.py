"""Arguments by PyTorch's names, the way its users pass them: every argument of a call by
keyword (input=, other=, A=, x= / n=, sections=, size=, ...), and the NumPy-style aliases
PyTorch's argument parser takes (x= / a= / x1= for input=, x2= for other=, axis=, keepdims=).
torch is the oracle: the same values, dtype and shape, or the same exception type (a name
PyTorch does not take raises TypeError). The exhaustive part walks torch's schemas."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _cases(L):
    """name -> call of module L (torch or llgrad) on the same small tensors."""
    rng = np.random.RandomState(0)
    x = L.tensor(rng.rand(3, 3) + 3 * np.eye(3))
    y = L.tensor(rng.rand(3, 3))
    v, i = L.tensor([0.5, 1.5]), L.tensor([0, 2])
    lo = L.tensor(np.linalg.cholesky(rng.rand(3, 3) + 3 * np.eye(3)).round(3))
    F, lin, sp = L.nn.functional, L.linalg, L.special
    return {
        # torch.linalg: input= where its schema says self, A= where it says A
        "linalg.pinv(input=)": lambda: lin.pinv(input=x),
        "linalg.pinv(A=) raises": lambda: lin.pinv(A=x),
        "linalg.pinv(x=)": lambda: lin.pinv(x=x, hermitian=False),
        "linalg.det(A=)": lambda: lin.det(A=x),
        "linalg.det(input=) raises": lambda: lin.det(input=x),
        "linalg.inv(A=)": lambda: lin.inv(A=x),
        "linalg.vector_norm(input=)": lambda: lin.vector_norm(input=x, ord=1, dim=0, keepdim=True),
        "linalg.vector_norm(x=)": lambda: lin.vector_norm(x=x),
        "linalg.matrix_norm(input=)": lambda: lin.matrix_norm(input=x, ord="nuc"),
        "linalg.norm(input=)": lambda: lin.norm(input=x, ord=2),
        "linalg.cond(input=)": lambda: lin.cond(input=x, p=1),
        "linalg.matrix_rank(input=)": lambda: lin.matrix_rank(input=x, hermitian=False),
        "linalg.eigvalsh(input=)": lambda: lin.eigvalsh(input=x + x.mT, UPLO="U"),
        "linalg.cholesky(input=)": lambda: lin.cholesky(input=x @ x.mT, upper=True),
        "linalg.lstsq(input=, b=)": lambda: lin.lstsq(input=x, b=y).solution,
        "linalg.lstsq(A=, B=) raises": lambda: lin.lstsq(A=x, B=y),
        "linalg.solve(A=, B=)": lambda: lin.solve(A=x, B=y),
        "linalg.matrix_exp(input=)": lambda: lin.matrix_exp(input=x * 0.1),
        "linalg.solve_triangular(input=)": lambda: lin.solve_triangular(input=lo, B=y,
                                                                        upper=False),
        "linalg.tensorsolve(input=, other=)": lambda: lin.tensorsolve(input=x, other=v.new_ones(3)),
        "linalg.householder_product(input=)": lambda: lin.householder_product(input=y, tau=v),
        "matrix_exp(input=)": lambda: L.matrix_exp(input=x * 0.1),
        "cholesky_solve(input=, input2=)": lambda: L.cholesky_solve(input=y, input2=lo),
        "cholesky_solve(B=, L=) raises": lambda: L.cholesky_solve(B=y, L=lo),
        "cholesky_inverse(input=)": lambda: L.cholesky_inverse(input=lo),
        "orgqr(input2=)": lambda: y.orgqr(input2=v),
        # torch.special: its schemas' x= / n= for the polynomials and four of the Bessels
        "special.chebyshev_polynomial_t(x=, n=)": lambda: sp.chebyshev_polynomial_t(x=y, n=3),
        "special.hermite_polynomial_h(x, n=)": lambda: sp.hermite_polynomial_h(y, n=v[1]),
        "special.legendre_polynomial_p(input=) raises":
            lambda: sp.legendre_polynomial_p(input=y, other=2),
        "special.airy_ai(x=)": lambda: sp.airy_ai(x=y),
        "special.airy_ai(input=) raises": lambda: sp.airy_ai(input=y),
        "special.bessel_j0(input=)": lambda: sp.bessel_j0(input=y),
        "special.bessel_j0(x=)": lambda: sp.bessel_j0(x=y),
        "special.spherical_bessel_j0(x=)": lambda: sp.spherical_bessel_j0(x=y),
        # factories and *_like
        "zeros_like(input=)": lambda: L.zeros_like(input=x, dtype=L.float32),
        "ones_like(input=)": lambda: L.ones_like(input=x),
        "full_like(input=, fill_value=)": lambda: L.full_like(input=x, fill_value=2.0),
        "arange(end=)": lambda: L.arange(end=4),
        "arange(start=, end=)": lambda: L.arange(start=1, end=4.0),
        "new_zeros(size=)": lambda: x.new_zeros(size=(2,)),
        "new_ones(size=, dtype=)": lambda: x.new_ones(size=(2, 1), dtype=L.int32),
        "new_empty(size=).shape": lambda: x.new_empty(size=(2,)).shape,
        # overloads whose names differ: max(other=), tensor_split(sections= / indices=)
        "max(other=)": lambda: x.max(other=y),
        "min(input=, other=)": lambda: L.min(input=x, other=y),
        "tensor_split(sections=)": lambda: x.tensor_split(sections=2),
        "tensor_split(indices=, dim=)": lambda: L.tensor_split(x, indices=[1], dim=1),
        "tensor_split(input=, tensor_indices_or_sections=)":
            lambda: L.tensor_split(input=x, tensor_indices_or_sections=L.tensor([1])),
        "tensor_split(foo=) raises": lambda: L.tensor_split(x, foo=2),
        "hsplit(sections=)": lambda: x[:, :2].hsplit(sections=2),
        "vsplit(indices=)": lambda: L.vsplit(x, indices=[1]),
        "swapaxes(axis0=, axis1=)": lambda: x[:2].swapaxes(axis0=0, axis1=1),
        "sum_to_size(size=)": lambda: x.sum_to_size(size=(1, 3)),
        # other names
        "equal(other=)": lambda: x.equal(other=y),
        "equal(input=, other=)": lambda: L.equal(input=x, other=x),
        "dot(tensor=)": lambda: v.dot(tensor=v),
        "dot(other=) raises": lambda: v.dot(other=v),
        "result_type(tensor=, other=)": lambda: str(L.result_type(tensor=x, other=1)).split(".")[-1],
        "index_reduce(input=)": lambda: L.index_reduce(input=x, dim=0, index=i, source=y[:2],
                                                       reduce="prod"),
        "get_device(input=)": lambda: L.get_device(input=x),
        "F.one_hot(input=)": lambda: F.one_hot(input=i, num_classes=3),
        "F.one_hot(tensor=) raises": lambda: F.one_hot(tensor=i),
        "F.softmax(_stacklevel=)": lambda: F.softmax(x, dim=0, _stacklevel=5, dtype=L.float32),
        "F.log_softmax(input=, _stacklevel=)": lambda: F.log_softmax(input=x, dim=1, _stacklevel=3),
        # NumPy-style aliases of PyTorch's argument parser (x= / x1= / x2= for input= and
        # other= in the linalg, special and fft namespaces only: numpy_names.py)
        "add(input=, other=, alpha=)": lambda: L.add(input=x, other=y, alpha=2),
        "sum(input=, axis=, keepdims=)": lambda: L.sum(input=x, axis=0, keepdims=True),
        "fft.fft(x=)": lambda: L.fft.rfft(x=x[0]).abs(),
        # keyword forms that already worked (kept from regressing)
        "clamp(input=, min=, max=)": lambda: L.clamp(input=x, min=0.5, max=1.0),
        "pow(input=, exponent=)": lambda: L.pow(input=x, exponent=2),
        "add(input=, other=, alpha=)": lambda: L.add(input=x, other=y, alpha=2),
        "sum(dim=, keepdim=, dtype=)": lambda: x.sum(dim=1, keepdim=True, dtype=L.float32),
        "F.linear(input=, weight=, bias=)": lambda: F.linear(input=x, weight=y, bias=v[:1]),
        "lerp(end=, weight=)": lambda: x.lerp(end=y, weight=0.5),
        "addcmul(input=, tensor1=, tensor2=, value=)":
            lambda: L.addcmul(input=x, tensor1=y, tensor2=y, value=2),
        "where(condition=, input=, other=)": lambda: L.where(condition=x > 1, input=x, other=y),
        "gather(dim=, index=)": lambda: x.gather(dim=0, index=L.tensor([[0, 1, 2]])),
        "cumsum(input=, dim=, dtype=)": lambda: L.cumsum(input=x, dim=0, dtype=L.float32),
        "mul(foo=) raises": lambda: x.mul(foo=1),
        "sum(foo=) raises": lambda: L.sum(x, foo=1),
    }


def _flat(r):
    return [z for q in r for z in _flat(q)] if isinstance(r, (tuple, list)) else [r]


def _run(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call(), None
        except Exception as e:      # (compared by type with torch's)
            return None, e


def _same(want, got):
    """torch's result want and llgrad's got: the same values, dtypes and shapes."""
    a, b = _flat(want), _flat(got)
    assert len(a) == len(b)
    for u, w in zip(a, b):
        if isinstance(u, torch.Tensor):
            assert isinstance(w, llgrad.Tensor)
            assert tuple(w.shape) == tuple(u.shape)
            assert str(w.dtype).split(".")[-1] == str(u.dtype).split(".")[-1]
            tol = 1e-6 if u.dtype == torch.float32 else 1e-9
            np.testing.assert_allclose(w.detach().numpy(), u.detach().numpy(), rtol=tol,
                                       atol=tol * 1e-3)
        else:
            assert w == u


NAMES = list(_cases(torch))


@pytest.mark.parametrize("name", NAMES)
def test_keyword_form_matches_torch(name):
    (want, terr), (got, lerr) = _run(_cases(torch)[name]), _run(_cases(llgrad)[name])
    if terr is not None or lerr is not None:
        assert type(lerr) is type(terr) or isinstance(lerr, type(terr)), (terr, lerr)
        assert name.endswith("raises") == isinstance(terr, TypeError)
        return
    _same(want, got)


def _keyword_forms(x, y):
    return (llgrad.zeros_like(input=x) + x.max(other=y) * llgrad.add(input=x, other=y, alpha=2),
            llgrad.sum(input=x, axis=0, keepdims=True) + x.tensor_split(sections=3)[1])


def _compiled_equals_eager(f, shapes, *, calls=3):
    compiled = llgrad.compile(f)
    rng = np.random.RandomState(1)
    for _ in range(calls):
        args = [llgrad.tensor(rng.rand(*s)) for s in shapes]
        want, got = f(*args), compiled(*args)
        if hasattr(compiled, "wait"):       # (LLGRAD_COMPILE=background: the native build)
            compiled.wait()
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)
    assert compiled.n_traces == 1


def test_compiled_keyword_forms_equal_eager():
    _compiled_equals_eager(_keyword_forms, [(3, 3), (3, 3)])


@pytest.mark.slow
def test_compiled_linalg_and_one_hot_keyword_forms_equal_eager():
    def f(x, y):
        return (llgrad.linalg.det(A=x) + llgrad.linalg.pinv(input=y).sum(),
                llgrad.linalg.vector_norm(input=x, ord=2, dim=0) + llgrad.exp(input=y),
                llgrad.special.chebyshev_polynomial_t(x=y, n=2),
                llgrad.nn.functional.one_hot(input=llgrad.tensor([0, 2]), num_classes=3),
                llgrad.full_like(input=x, fill_value=2.0) - llgrad.linalg.inv(A=x + 3))
    _compiled_equals_eager(f, [(3, 3), (3, 3)])


# ---- exhaustive: every aten schema of a name llgrad has, its arguments by keyword -----------

_SKIP_TYPES = ("Dimname", "Generator", "Layout", "Device", "MemoryFormat", "Storage", "Stream")
_RANDOM = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "rand",
           "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm",
           "bernoulli", "multinomial", "normal", "poisson", "dropout", "feature_dropout",
           "alpha_dropout", "feature_alpha_dropout", "rrelu", "set_", "resize_", "storage"}
# llgrad's TypeError where torch takes the names: overloads llgrad has not (isin of a number,
# result_type of numbers, sparse_coo_tensor(size=), repeat_interleave(repeats=)), arguments it
# lacks (stft's align_to_window, expand's implicit, packed-sequence RNN data), torch.trace
# (llgrad.trace is its tracer's) and the quantized and distributed stubs
_KNOWN = {"isin", "result_type", "sparse_coo_tensor", "repeat_interleave", "stft", "expand",
          "expand_copy", "gru", "lstm", "rnn_relu", "rnn_tanh", "trace", "dequantize",
          "quantize_per_tensor", "is_distributed"}
_INTS = {"dim": 1, "dim0": 0, "dim1": 1, "n": 2, "chunks": 2, "sections": 2, "start": 0,
         "end": 2, "steps": 3, "num_classes": 3, "source": 0, "destination": 1}
_LISTS = {"dims": [1, 0], "size": [3, 2], "shape": [3, 2], "repeats": [1, 2]}
_STRS = {"rounding_mode": "floor", "reduce": "sum", "approximate": "tanh", "side": "left",
         "indexing": "ij", "mode": "reduced", "interpolation": "linear", "UPLO": "L"}


def _value(name, kind):
    kind = kind[9:-1] if kind.startswith("Optional[") else kind
    if name == "dtype":
        return torch.float32
    if kind == "Tensor":
        if name in ("index", "indices"):
            return torch.tensor([0, 1])
        if name in ("mask", "condition"):
            return torch.tensor([[True, False, True], [False, True, False]])
        return torch.rand(2, 3, generator=torch.Generator().manual_seed(0),
                          dtype=torch.float64) + 0.25
    return {"int": lambda: _INTS.get(name, 1), "List[int]": lambda: _LISTS.get(name, [1]),
            "bool": lambda: True, "number": lambda: 0.5, "float": lambda: 0.5,
            "str": lambda: _STRS.get(name)}.get(kind, lambda: None)()


def _keyword_calls(schema, method):
    """(kwargs) of schema: its required arguments by keyword, then each optional one too."""
    args = list(schema.arguments)
    if any(any(t in str(a.type) for t in _SKIP_TYPES) or
           (a.alias_info is not None and a.alias_info.is_write) for a in args):
        return
    required, optional = {}, []
    for a in args:
        if a.has_default_value():
            optional.append(a)
        elif (v := _value(a.name, str(a.type))) is None or a.name in ("layout", "device"):
            return
        else:
            required["input" if a.name == "self" else a.name] = v
    if method and "input" not in required:
        return
    yield dict(required)
    for a in optional:
        if a.name not in ("layout", "device", "pin_memory", "memory_format") and \
                (v := _value(a.name, str(a.type))) is not None:
            yield {**required, a.name: v}


def _to_llgrad(v):
    if isinstance(v, torch.Tensor):
        return llgrad.tensor(v.numpy())
    if isinstance(v, torch.dtype):
        return getattr(llgrad, str(v).split(".")[-1])
    return [_to_llgrad(x) for x in v] if isinstance(v, list) else v


def _owners(aten_name):
    """(label, torch's owner, llgrad's, the name there, method?) of an aten name."""
    for prefix in ("linalg_", "special_", "fft_"):
        if aten_name.startswith(prefix):
            ns = prefix[:-1]
            yield ns + ".", getattr(torch, ns), getattr(llgrad, ns), aten_name[len(prefix):], False
            return
    yield "", torch, llgrad, aten_name, False
    yield "Tensor.", torch.Tensor, llgrad.Tensor, aten_name, True


def _schema_mismatches():
    found = []
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::") or schema.name[6:] in _RANDOM | _KNOWN:
            continue
        for label, theirs, ours, name, method in _owners(schema.name[6:]):
            if not (hasattr(theirs, name) and hasattr(ours, name)):
                continue
            for kw in _keyword_calls(schema, method):
                mine = {k: _to_llgrad(v) for k, v in kw.items()}
                if method:
                    t, s = kw.pop("input"), mine.pop("input")
                    calls = (lambda: getattr(t, name)(**kw), lambda: getattr(s, name)(**mine))
                else:
                    calls = (lambda: getattr(theirs, name)(**kw),
                             lambda: getattr(ours, name)(**mine))
                (_, terr), (_, lerr) = _run(calls[0]), _run(calls[1])
                if isinstance(lerr, TypeError) and not isinstance(terr, TypeError):
                    found.append(f"{label}{name}({', '.join(sorted(kw))}): {lerr}")
    return found


@pytest.mark.slow
def test_every_schema_keyword_form_binds_as_torch():
    assert _schema_mismatches() == []
