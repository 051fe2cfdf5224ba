"""Sweep 15 (D), part 4: the compiler recipes. "torch.compiler.set_stance" (force_eager as a
decorator, context manager and plain call; eager_on_recompile; fail_on_recompile; the stance
refused inside a compiled function), with the values the recipe prints in PyTorch; a
function that branches on torch.compiler.is_compiling() gives its compiled branch also
while its native code is still being built in the background (calls stand in for it
eagerly); torch._logging.set_logs (the foreach and torch_logs recipes call it)."""
import pytest

import llgrad
from llgrad.compile import background

torch = llgrad      # (the recipe as written, read with llgrad)


def _values(t):
    return t.tolist()


def test_set_stance_recipe():
    """recipes/torch_compiler_set_stance_tutorial, its prints as PyTorch gives them."""
    @torch.compile
    def foo(x):
        if torch.compiler.is_compiling():
            return x + 1
        else:
            return x - 1

    inp = torch.zeros(3)
    assert _values(foo(inp)) == [1.0] * 3           # compiled

    @torch.compiler.set_stance("force_eager")
    def bar(x):
        return foo(x)

    assert _values(bar(inp)) == [-1.0] * 3          # not compiled
    assert _values(foo(inp)) == [1.0] * 3           # (decorating changed nothing outside)
    with torch.compiler.set_stance("force_eager"):
        assert _values(foo(inp)) == [-1.0] * 3
    assert _values(foo(inp)) == [1.0] * 3
    torch.compiler.set_stance("force_eager")
    try:
        assert _values(foo(inp)) == [-1.0] * 3
    finally:
        torch.compiler.set_stance("default")
    assert _values(foo(inp)) == [1.0] * 3

    @torch.compile
    def baz(x):
        with torch.compiler.set_stance("force_eager"):
            return x + 1

    with pytest.raises(AssertionError, match="forbidden callable"):
        baz(inp)

    @torch.compiler.set_stance("force_eager")
    def inner(x):
        return x + 1

    @torch.compile
    def outer(x):
        return inner(x)

    with pytest.raises(AssertionError, match="forbidden callable"):
        outer(inp)

    @torch.compile
    def my_big_model(x):
        return torch.relu(x)

    my_big_model(torch.randn(3))
    with torch.compiler.set_stance("fail_on_recompile"):
        assert _values(my_big_model(torch.ones(3))) == [1.0] * 3
        with pytest.raises(RuntimeError, match="Detected recompile when torch.compile "
                                               "stance is 'fail_on_recompile'"):
            my_big_model(torch.randn(4))

    @torch.compile
    def my_huge_model(x):
        if torch.compiler.is_compiling():
            return x + 1
        else:
            return x - 1

    assert _values(my_huge_model(torch.zeros(3))) == [1.0] * 3
    with torch.compiler.set_stance("eager_on_recompile"):
        assert _values(my_huge_model(torch.zeros(3))) == [1.0] * 3
        assert _values(my_huge_model(torch.zeros(4))) == [-1.0] * 4
        assert _values(my_huge_model(torch.zeros(3))) == [1.0] * 3
    assert my_huge_model.n_traces == 1

    @torch.compile
    def my_humongous_model(x):
        return torch.sin(x, x)

    with pytest.raises(TypeError):
        with torch.compiler.set_stance("force_eager"):
            my_humongous_model(torch.randn(3))
    assert my_humongous_model.n_traces == 0
    with pytest.raises(RuntimeError, match="invalid torch.compile stance"):
        torch.compiler.set_stance("bogus")
    assert _values(foo(inp)) == [1.0] * 3


def test_is_compiling_while_building(monkeypatch, tmp_path):
    """Until its native code is built (in the background, the default), a compiled call runs
    the function eagerly in its place: there is_compiling() is true, as in the trace, so a
    function branching on it gives the compiled result on every call (it gave the eager
    branch before)."""
    monkeypatch.setenv("LLGRAD_COMPILE", "background")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(background, "request", lambda entry, build: None)   # (never built)

    @llgrad.compile
    def foo(x):
        if llgrad.compiler.is_compiling():
            return x + 1
        return x - 1

    x = llgrad.zeros(3)
    assert [_values(foo(x)) for _ in range(3)] == [[1.0] * 3] * 3
    assert foo.n_traces == 1 and foo.entries[0]._forward_run is None
    assert not llgrad.compiler.is_compiling()
    assert _values(foo.fn(x)) == [-1.0] * 3


def test_logging_set_logs(capsys):
    """torch._logging.set_logs(recompiles=True, output_code=True) shows llgrad's recompiles
    and compile channels (not its guards); set_logs() turns them off; an unknown name is a
    TypeError."""
    f = llgrad.compile(lambda x: x.sin())
    try:
        llgrad._logging.set_logs(recompiles=True, output_code=True, fusion=True)
        f(llgrad.ones(2))
        f(llgrad.ones(3))
    finally:
        llgrad._logging.set_logs()
    f(llgrad.ones(4))
    err = capsys.readouterr().err
    assert "[llgrad:recompiles]" in err and "[llgrad:compile]" in err, err
    assert "[llgrad:guards]" not in err and err.count("traced <lambda>") == 2, err
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        llgrad._logging.set_logs(bogus=True)
