# -- complex_region: made by a lowering pass (ir/complex_regions.py), never traced --
# (runs in test_optable.py's namespace: Exempt, EXEMPT, R). Its sample is a compiled call whose
# graph holds one: its second call runs native code that calls the region back.


def _region_call(T, x):
    import warnings
    f = T.compile(lambda y: T.view_as_real(T.fft.fft(y * 2)).sum(-1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no fallback to eager: the region runs)
        f(x.detach())
        return f(x.detach())


EXEMPT["complex_region"] = Exempt(
    "made by a lowering pass only (its graph's backward holds regions of its own): no VJP",
    _region_call, (R(4),))
# (its float results have derivatives, but through the ops it holds: a traced backward's own)
FLOAT_WITHOUT_DERIVATIVE.add("complex_region")
