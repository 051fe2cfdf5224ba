"""torch.compile's keywords on llgrad.compile, torch.compiler's names (llgrad.compiler) and
torch._dynamo's (llgrad._dynamo): PyTorch's checks and messages, disable, reset, the
compiler.disable graph break, and the backends 'inductor' / 'eager'."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn


def _f(x):
    return (x * 3).sum()


@pytest.mark.parametrize("kw", [dict(mode="reduce-overhead"), dict(mode="max-autotune"),
                                dict(dynamic=True), dict(dynamic=False),
                                dict(options={"triton.cudagraphs": False}),
                                dict(backend="inductor", fullgraph=True, name="step"),
                                dict(recompile_limit=None)])
def test_torch_keywords_compile(kw):
    f = llgrad.compile(_f, **kw)
    assert f(llgrad.ones(3)).item() == 9.0 and f.n_traces == 1


@pytest.mark.parametrize("kw,err,match", [
    (dict(mode="fast"), RuntimeError, "Unrecognized mode=fast, should be one of: default"),
    (dict(mode="default", options={}), RuntimeError, "Either mode or options can be specified"),
    (dict(dynamic="yes"), AssertionError, "Expected enable to be a bool"),
    (dict(foo=1), TypeError, "unexpected keyword argument 'foo'"),
    (dict(backend=lambda gm, example: gm), TypeError, "a backend function"),
    (dict(backend="nope"), ValueError, "unknown llgrad backend 'nope'"),
])
def test_bad_torch_keywords(kw, err, match):
    with pytest.raises(err, match=match):
        llgrad.compile(_f, **kw)


def test_disable_returns_the_function_and_module():
    m = nn.Linear(2, 2)
    assert llgrad.compile(_f, disable=True) is _f
    assert llgrad.compile(m, disable=True) is m


def test_eager_backends_run_the_function():
    for name in ("eager", "aot_eager"):
        calls = []

        def g(x):
            calls.append(1)
            return x + 1
        f = llgrad.compile(g, backend=name)
        f(llgrad.ones(2))
        f(llgrad.ones(2))
        assert len(calls) == 2


def test_compiler_disable_is_a_graph_break():
    @llgrad.compiler.disable
    def helper(x):
        return x * 2

    f = llgrad.compile(lambda x: helper(x).sum())
    with pytest.warns(UserWarning, match="helper is marked compiler.disable"):
        assert f(llgrad.ones(3)).item() == 6.0
    assert helper(llgrad.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(Exception, match="marked compiler.disable"):
        llgrad.compile(lambda x: helper(x).sum(), fullgraph=True)(llgrad.ones(3))


def _only(monkeypatch, *fns):
    """reset() is process-wide: keep it to this test's compiled functions (other modules'
    were warmed at import and expect their entries)."""
    import weakref
    monkeypatch.setattr(llgrad.compiler, "registry", weakref.WeakSet(fns))


def test_reset_forgets_entries(monkeypatch):
    f = llgrad.compile(_f)
    _only(monkeypatch, f)
    for _ in range(3):
        f(llgrad.ones(2))
    assert f.n_traces == 1
    llgrad.compiler.reset()
    assert f.n_traces == 0 and not f.entries
    assert f(llgrad.ones(2)).item() == 6.0
    assert f.n_traces == 1 and len(f.entries) == 1
    assert "inductor" in llgrad.compiler.list_backends()


def test_is_compiling():
    seen = []

    def g(x):
        seen.append(llgrad.compiler.is_compiling())
        return x.sum()
    llgrad.compile(g)(llgrad.ones(2))
    assert seen == [True] and llgrad.compiler.is_compiling() is False


def test_dynamo_names(monkeypatch):
    _only(monkeypatch)
    t = llgrad.ones(3, 4)
    llgrad._dynamo.mark_dynamic(t, 0)
    llgrad._dynamo.maybe_mark_dynamic(t, 1)
    llgrad._dynamo.mark_static(t)
    with llgrad._dynamo.config.patch(cache_size_limit=16):
        llgrad._dynamo.reset()
        f = llgrad.compile(_f)
        assert f(t).item() == 36.0 and f.recompile_limit == 16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = llgrad._dynamo.explain(_f, t)
    assert report is not None
    np.testing.assert_array_equal(t.numpy(), np.ones((3, 4)))
