"""torch._dynamo.config.recompile_limit (cache_size_limit) is the recompile limit of compiled
functions given none of their own, read when a new specialisation would be traced, as in
PyTorch; compile(recompile_limit=...) overrides it."""
import warnings

import numpy as np
import pytest

import llgrad

config = llgrad._dynamo.config


def _step(x):
    return (x * 2.0).sum()


def _sizes(f, sizes):
    """Call f on ones of each size; (results, the warnings' texts)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = [f(llgrad.ones(n)).item() for n in sizes]
    return out, [str(x.message) for x in w if "recompile limit" in str(x.message)]


def test_the_default_is_eight():
    f = llgrad.compile(_step, dynamic=False)    # (a trace per size: size_templates.py)
    out, warned = _sizes(f, range(1, 11))
    assert out == [2.0 * n for n in range(1, 11)]
    assert f.n_traces == 8 and f.recompile_limit == 8 and len(warned) == 1   # (once)


def test_config_sets_the_limit_of_functions_without_their_own():
    with config.patch(recompile_limit=2):
        f = llgrad.compile(_step)
        out, warned = _sizes(f, [1, 2, 3, 1, 2])
        assert out == [2.0, 4.0, 6.0, 2.0, 4.0]        # (3 ran eagerly; 1 and 2 compiled)
        assert f.n_traces == 2 and len(warned) == 1 and "recompile limit (2)" in warned[0]
        g = llgrad.compile(_step, recompile_limit=3)    # (its own limit wins)
        _sizes(g, [1, 2, 3, 4])
        assert g.n_traces == 3
    assert config.recompile_limit == 8


def test_config_is_read_when_the_limit_is_reached():
    f = llgrad.compile(_step)
    with config.patch(recompile_limit=1):
        _sizes(f, [1, 2])
        assert f.n_traces == 1
    config.cache_size_limit = 20            # (raised later: the next new size traces)
    try:
        out, warned = _sizes(f, [2, 3])
        assert out == [4.0, 6.0] and f.n_traces == 3 and not warned
    finally:
        config.reset()


def test_cache_size_limit_is_the_same_setting():
    with config.patch(cache_size_limit=5):
        assert config.recompile_limit == config.cache_size_limit == 5
        assert llgrad.compile(_step).recompile_limit == 5
    assert config.cache_size_limit == 8
    assert config.accumulated_cache_size_limit == config.accumulated_recompile_limit == 256


def test_torch_agrees_on_the_names():
    torch = pytest.importorskip("torch")
    d = torch._dynamo.config
    with d.patch(cache_size_limit=5), config.patch(cache_size_limit=5):
        assert (d.recompile_limit, d.cache_size_limit) == \
            (config.recompile_limit, config.cache_size_limit)
    with pytest.raises(AttributeError) as theirs:
        d.no_such_setting_here
    with pytest.raises(AttributeError) as ours:
        config.no_such_setting_here
    assert str(ours.value) == str(theirs.value)


def test_other_settings_are_held():
    with config.patch(suppress_errors=True, some_setting_of_a_newer_torch=3):
        assert config.suppress_errors is True and config.some_setting_of_a_newer_torch == 3
    with pytest.raises(AttributeError):
        config.some_setting_of_a_newer_torch


def test_a_bad_limit_is_named():
    f = llgrad.compile(_step)
    with config.patch(recompile_limit="lots"):
        with pytest.raises(ValueError, match=r"torch._dynamo.config.recompile_limit must be"):
            f(llgrad.ones(2))
    np.testing.assert_array_equal(f(llgrad.ones(2)).numpy(), 4.0)
