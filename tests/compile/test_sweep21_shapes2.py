"""Training and generation programs whose shapes change between calls (sweep 21), compiled to
native code: a DataLoader's ragged last batch with BatchNorm, Adam and a scheduler; a KV
cache grown at each step; a wrong-size input raising eager's error. Every observation
equals torch's and eager llgrad's (test_sweep21_shapes3.py: images, shared code)."""
import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _call(g, *args):
    try:
        return g(*args)
    except (RuntimeError, ValueError, IndexError) as e:   # (torch.Size is llgrad.Size here)
        return type(e)(str(e).replace("torch.Size", "Size").replace("llgrad.Size", "Size"))


def ragged_batches_with_batchnorm_adam_and_steplr(lib, wrap, see):
    data = lib.utils.data
    ds = data.TensorDataset(lib.arange(13 * 4.).reshape(13, 4).sin(), (lib.arange(13) * 7) % 3)
    loader = data.DataLoader(ds, batch_size=5, drop_last=False)      # 5, 5, 3
    # (no bias before the BatchNorm: its gradient is rounding noise, which Adam magnifies)
    m = lib.nn.Sequential(lib.nn.Linear(4, 6, bias=False), lib.nn.BatchNorm1d(6),
                          lib.nn.ReLU(), lib.nn.Linear(6, 3))
    opt = lib.optim.Adam(m.parameters(), lr=1e-2)
    sch = lib.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)

    def step(x, y):
        opt.zero_grad()
        out = m(x)
        loss = lib.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss, out
    g, ev = wrap(step), wrap(m)
    for _ in range(2):
        m.train()
        for x, y in loader:
            see(g(x, y), m[1].running_mean, m[1].running_var, m[1].num_batches_tracked,
                m[0].weight.grad, m[3].bias)
        sch.step()
        m.eval()
        with lib.no_grad():
            for n in [7, 1, 0]:                 # eval at other batch sizes, 1 and empty
                see(ev(ds.tensors[0][:n]))
    m.train()
    for n in [1, 0]:                            # BatchNorm's error at 1, an empty batch
        see(_call(g, ds.tensors[0][:n], ds.tensors[1][:n]), m[0].weight, m[0].weight.grad,
            m[1].running_mean, m[1].num_batches_tracked)


def growing_kv_cache(lib, wrap, see):
    d = 4
    q_p, k_p, v_p = (lib.nn.Linear(d, d) for _ in range(3))
    emb = lib.nn.Embedding(11, d)

    def step(tok, kc, vc):
        h = emb(tok)
        k = lib.cat([kc, k_p(h)], 1)
        v = lib.cat([vc, v_p(h)], 1)
        att = ((q_p(h) @ k.transpose(1, 2)) / 2.0).softmax(-1)
        return att @ v, k, v
    g = wrap(step)
    with lib.no_grad():
        for b in [2, 1, 2]:
            kc, vc = lib.zeros(b, 0, d), lib.zeros(b, 0, d)
            tok = lib.zeros(b, 1, dtype=lib.long)
            for _ in range(5):
                out, kc, vc = g(tok, kc, vc)
                tok = (out.sum(-1).abs() * 100).long() % 11
                see(out, kc, tok)


def wrong_sizes_raise_eagers_errors(lib, wrap, see):
    lin = lib.nn.Linear(4, 3)

    def f(x, y):
        return (lin(x) * y).sum(), x.view(x.size(0), 2, -1)
    g = wrap(f)
    for xs, ys in [((5, 4), (5, 3)), ((5, 4), (5, 3)), ((6, 4), (6, 3)), ((6, 4), (6, 3)),
                   ((5, 5), (5, 3)), ((5, 4), (6, 3)), ((7, 4), (7, 1)), ((7, 4), (3,)),
                   ((0, 4), (0, 3)), ((5, 3), (5, 3)), ((6, 4), (6, 3))]:
        see(_call(g, lib.ones(*xs), lib.ones(*ys)))


@pytest.mark.parametrize("scenario", [ragged_batches_with_batchnorm_adam_and_steplr,
                                      growing_kv_cache, wrong_sizes_raise_eagers_errors])
def test_native_calls_over_changing_shapes(scenario):
    runs(scenario, torch, backend="llvm")
