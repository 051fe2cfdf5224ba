"""Sweep 14 (D): the real PyTorch tutorials and pytorch/examples scripts, run as written
with `import llgrad as torch` (synthetic data in place of downloads). What they showed,
each as a small standalone piece of the tutorial compared with torch:

- recipes/swap_tensors: torch.utils.swap_tensors and torch.__future__'s conversion
  switches were missing (set_overwrite_module_params_on_conversion(True) assigns new
  Parameter objects on .double() / .half());
- examples/word_language_model: `import torch.onnx` at its top (llgrad had no onnx module);
- recipes/tuning_guide (channels_last): model.to(memory_format=torch.channels_last) raised
  on the first bias (a 1-D tensor): PyTorch converts the 4-D and 5-D tensors only;
- recipes/benchmark, timer_quick_start: torch.utils.benchmark (Timer, Compare) was missing."""
import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def _swap_recipe(lib):
    t1, t2 = lib.arange(2), lib.arange(3)
    before = (id(t1), id(t2))
    lib.utils.swap_tensors(t1, t2)
    out = [(id(t1), id(t2)) == before, t1.tolist(), t2.tolist()]
    # (the recipe's point: a new Parameter is not the one an optimiser holds; a list of the
    # parameters stands for torch.optim.SGD, whose first construction costs torch ~3 s)
    lib.manual_seed(0)
    mod = lib.nn.Linear(1, 2, bias=False)
    held = list(mod.parameters())
    mod.weight = lib.nn.Parameter(2 * mod.weight)
    out.append(held[0] is mod.weight)
    out.append(held[0].detach().numpy().tolist())
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0, 5.0])
    lib.utils.swap_tensors(a, b)
    out.append((a.tolist(), a.requires_grad, b.tolist(), b.requires_grad, b.is_leaf))
    (b * b).sum().backward()
    out.append(b.grad.tolist())
    p = lib.nn.Parameter(lib.ones(2))
    q = lib.ones(2)
    lib.utils.swap_tensors(p, q)     # the class goes with the contents
    out.append((type(p).__name__, type(q).__name__))
    return out


def test_swap_tensors_recipe():
    """recipes/swap_tensors.py's first part: swap_tensors swaps two tensors' contents (class,
    data, autograd state) keeping their identities, as torch.utils.swap_tensors."""
    assert _swap_recipe(llgrad) == _swap_recipe(torch)


def _conversion(lib, overwrite, swap):
    lib.__future__.set_overwrite_module_params_on_conversion(overwrite)
    lib.__future__.set_swap_module_params_on_conversion(swap)
    try:
        flags = (lib.__future__.get_overwrite_module_params_on_conversion(),
                 lib.__future__.get_swap_module_params_on_conversion())
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.BatchNorm1d(2))
        m(lib.ones(4, 3) * lib.arange(3.0)).pow(2).sum().backward()
        w, g, rm = m[0].weight, m[0].weight.grad, m[1].running_mean
        m.double()
        nw = m[0].weight
        return [flags, nw is w, type(nw).__name__, nw.requires_grad, str(nw.dtype)[-7:],
                str(nw.grad.dtype)[-7:], nw.grad.requires_grad, str(w.dtype)[-7:],
                str(g.dtype)[-7:], np.allclose(nw.grad.numpy(), g.numpy()),
                str(m[1].running_mean.dtype)[-7:]]
    finally:
        lib.__future__.set_overwrite_module_params_on_conversion(False)
        lib.__future__.set_swap_module_params_on_conversion(False)


@pytest.mark.parametrize("overwrite, swap", [(False, False), (True, False), (True, True),
                                             (False, True)])
def test_future_module_param_conversion(overwrite, swap):
    """torch.__future__'s switches (recipes/swap_tensors.py): with overwrite on (and swap
    off) a conversion assigns new Parameter objects (their gradients converted); otherwise
    the parameter objects stay, as in PyTorch."""
    assert _conversion(llgrad, overwrite, swap) == _conversion(torch, overwrite, swap)


def test_onnx_module_importable():
    """examples/word_language_model/main.py imports torch.onnx at its top; llgrad.onnx
    imports, says no export runs, and refuses to export (it has no exporter)."""
    onnx = importlib.import_module("llgrad.onnx")
    assert llgrad.onnx is onnx
    assert onnx.is_in_onnx_export() is torch.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError):
        onnx.export(llgrad.nn.Linear(1, 1), (llgrad.ones(1, 1),), "m.onnx")


def _word_lm_transformer(lib):
    """word_language_model/model.py's TransformerModel (its mask is log(tril(ones))), two
    SGD steps as main.py's train() does them (clip_grad_norm_, p.data.add_(grad, alpha))."""
    import math
    nn = lib.nn
    F = lib.nn.functional

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super(PositionalEncoding, self).__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = lib.zeros(max_len, d_model)
            position = lib.arange(0, max_len, dtype=lib.float).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2).float()
                               * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = lib.sin(position * div_term)
            pe[:, 1::2] = lib.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer('pe', pe)

        def forward(self, x):
            x = x + self.pe[:x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super(TransformerModel, self).__init__(d_model=ninp, nhead=nhead,
                                                   dim_feedforward=nhid,
                                                   num_encoder_layers=nlayers)
            self.model_type = 'Transformer'
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return lib.log(lib.tril(lib.ones(sz, sz)))

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = self._generate_square_subsequent_mask(len(src))
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    lib.manual_seed(1111)
    ntokens = 20
    model = TransformerModel(ntokens, 16, 2, 16, 2, 0.2)
    criterion = nn.NLLLoss()
    rng = np.random.default_rng(0)
    losses = []
    model.train()
    for _ in range(2):
        data = lib.tensor(rng.integers(0, ntokens, (5, 4)))
        targets = lib.tensor(rng.integers(0, ntokens, 20))
        model.zero_grad()
        output = model(data)
        output = output.view(-1, ntokens)
        loss = criterion(output, targets)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-1.0)
        losses.append(loss.item())
    model.eval()
    with lib.no_grad():
        out = model(lib.tensor(rng.integers(0, ntokens, (5, 4))))
    return losses, out.numpy(), model.decoder.weight.detach().numpy()


@pytest.mark.slow
def test_word_language_model_transformer():
    """examples/word_language_model's Transformer (dropout on: the same draws), as torch."""
    ref = _word_lm_transformer(torch)
    got = _word_lm_transformer(llgrad)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-4, atol=1e-6)


def _channels_last_model(lib, dtype=None):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4), lib.nn.ReLU(),
                          lib.nn.Flatten(), lib.nn.Linear(4 * 4 * 4, 2))
    params = list(m.parameters())
    args = (dtype,) if dtype is not None else ()
    out = m.to(*args, memory_format=lib.channels_last)
    return m, [out is m, all(p is q for p, q in zip(params, m.parameters())),
               [p.stride() for p in m.parameters()], [str(p.dtype)[-7:] for p in m.parameters()],
               [b.stride() for b in m.buffers()], [str(b.dtype)[-5:] for b in m.buffers()]]


@pytest.mark.parametrize("dtype", [None, "float64"])
def test_module_to_channels_last(dtype):
    """recipes/tuning_guide: model.to(memory_format=torch.channels_last) converts the 4-D
    weights only (biases, BatchNorm's vectors and Linear's weight stay as they are; it
    raised on the first bias), with or without a dtype; the parameters keep their objects."""
    ref = _channels_last_model(torch, getattr(torch, dtype) if dtype else None)[1]
    got = _channels_last_model(llgrad, getattr(llgrad, dtype) if dtype else None)[1]
    assert got == ref
    with pytest.raises(RuntimeError, match="rank 4"):
        llgrad.nn.Conv3d(1, 1, 1).to(memory_format=llgrad.channels_last)
    with pytest.raises(RuntimeError, match="rank 4"):
        torch.nn.Conv3d(1, 1, 1).to(memory_format=torch.channels_last)


def _channels_last_training(lib, compiled):
    m = _channels_last_model(lib)[0]
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = llgrad.compile(step)
    losses = []
    for _ in range(3):
        x = lib.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
        x = x.to(memory_format=lib.channels_last)
        losses.append(step(x, lib.tensor(rng.integers(0, 2, 2))).item())
    return losses, [p.detach().numpy() for p in m.parameters()]


@pytest.mark.slow
def test_channels_last_training_compiled():
    """The tuning guide's channels_last model and input, trained eagerly and compiled."""
    ref = _channels_last_training(torch, False)
    for compiled in (False, True):
        got = _channels_last_training(llgrad, compiled)
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
        for a, b in zip(got[1], ref[1]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def _timer_recipe(lib):
    """recipes/benchmark.py's uses of torch.utils.benchmark (the timings themselves vary)."""
    benchmark = importlib.import_module(lib.__name__ + ".utils.benchmark")

    def batched_dot_mul_sum(a, b):
        return a.mul(b).sum(-1)

    x = lib.randn(4, 8)
    t0 = benchmark.Timer(stmt='batched_dot_mul_sum(x, x)',
                         globals={'x': x, 'batched_dot_mul_sum': batched_dot_mul_sum},
                         label='Batched dot', sub_label='[4, 8]', description='mul/sum',
                         num_threads=1)
    m = t0.timeit(20)
    m2 = t0.blocked_autorange(min_run_time=0.01)
    t1 = benchmark.Timer(stmt='torch.ones(2) * 2', setup='import math')
    m3 = t1.timeit(5)
    report = repr(m).splitlines()
    out = [m.number_per_run, len(m.times), len(m.raw_times), m.title, m.stmt, m.label,
           m.sub_label, m.description, m.num_threads, report[1:3], report[3].split()[1], report[-1].split(),
           m3.title, m3.stmt, m3.setup, len(repr(m3).splitlines()),
           len(m2.times) >= 1, m2.median > 0, m2.mean > 0, m2.iqr >= 0,
           abs(m.mean - m.times[0]) < 1e-12, m.iqr == 0.0]
    compare = benchmark.Compare([m, m2])
    compare.trim_significant_figures()
    compare.colorize()
    out.append("Batched dot" in str(compare) and "[4, 8]" in str(compare))
    with pytest.raises(NotImplementedError):
        t0.repeat()
    return out


@pytest.mark.slow      # (~1 s: torch.utils.benchmark's import and the timings)
def test_benchmark_timer_recipe():
    """torch.utils.benchmark (recipes/benchmark.py, timer_quick_start.py) was missing:
    Timer / Measurement / Compare as PyTorch's, apart from the timings."""
    ref = _timer_recipe(torch)
    got = _timer_recipe(llgrad)
    assert got == ref
