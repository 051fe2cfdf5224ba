"""What bench/untuned_models_eighth.py's models found (H5, 2026-12-05): the CTC model's
ctc_loss ran ~24 ops a time step (each with its node, and log_probs[t]'s SelectBackward0 a
scatter into zeros of log_probs' size), and the BERT model's logits[mask] backward summed
into zeros by np.add.at, ~6x slower than += for positions a mask names once each; ctc_loss of
an empty log_probs raised an IndexError, not torch's RuntimeError. The six models themselves
train as torch's (slow)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _nodes(t):
    seen, todo = set(), [t.grad_fn]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        todo.extend(f for f, _ in n.next_functions)
    return len(seen)


def _ctc_case(lib, dtype, zero_infinity=False, reduction="sum"):
    rng = np.random.default_rng(3)
    T, N, C = 30, 4, 6
    x = lib.tensor(rng.standard_normal((T, N, C)), dtype=dtype, requires_grad=True)
    # repeated labels (no skip between them), an impossible sample (3 labels, 2 steps)
    targets = lib.tensor([1, 1, 2, 3, 3, 3, 4, 5, 2, 2, 1])
    target_lengths = lib.tensor([3, 4, 1, 3])
    input_lengths = lib.tensor([30, 17, 9, 2])
    loss = lib.nn.functional.ctc_loss(x.log_softmax(2), targets, input_lengths, target_lengths,
                                      reduction=reduction, zero_infinity=zero_infinity)
    return x, loss


@pytest.mark.parametrize("zero_infinity,reduction", [(True, "sum"), (True, "mean"),
                                                     (False, "none")])
def test_ctc_loss_matches_torch(zero_infinity, reduction):
    got, want = (_ctc_case(lib, lib.float64, zero_infinity, reduction) for lib in (llgrad, torch))
    np.testing.assert_allclose(got[1].detach().numpy(), want[1].detach().numpy(), rtol=1e-10)
    w = torch.ones_like(want[1])
    want[1].backward(w)
    got[1].backward(llgrad.ones_like(got[1]))
    np.testing.assert_allclose(got[0].grad.numpy(), want[0].grad.numpy(), rtol=1e-9, atol=1e-12,
                               equal_nan=True)


def test_ctc_loss_graph_is_a_few_nodes_a_step():
    x, loss = _ctc_case(llgrad, llgrad.float32, True)
    assert _nodes(loss) < 8 * x.shape[0]        # (was ~24 a step)


def test_ctc_loss_double_backward_raises_as_torch():
    # (ctc_loss is an op of its own since stop 75, as PyTorch's: its backward op has no
    # derivative, and a second backward through it raises PyTorch's error)
    for lib in (llgrad, torch):
        x, loss = _ctc_case(lib, lib.float64, True)
        g, = lib.autograd.grad(loss, x, create_graph=True)
        with pytest.raises(RuntimeError, match="_ctc_loss_backward is not implemented"):
            lib.autograd.grad((g * g).sum(), x)


def test_masked_index_backward_skips_add_at(monkeypatch):
    from llgrad.ir import ops_index

    class NoAddAt:
        def __getattr__(self, name):
            return getattr(np, name)

        class add:
            @staticmethod
            def at(*a):
                raise AssertionError("np.add.at for a mask's unique positions")
    monkeypatch.setattr(ops_index, "np", NoAddAt())
    rng = np.random.default_rng(0)
    x, m = rng.standard_normal((3, 5, 7)), rng.random((3, 5)) < 0.5
    w = rng.standard_normal(7)
    grads = []
    for lib in (llgrad, torch):
        t = lib.tensor(x, requires_grad=True)
        (t[lib.tensor(m)] * lib.tensor(w)).sum().backward()
        grads.append(t.grad.numpy())
        acc = lib.zeros(3, 5, 7, dtype=lib.float64).index_put_(
            (lib.tensor(m),), lib.tensor(w), accumulate=True)
        grads.append(acc.numpy())
    np.testing.assert_array_equal(grads[0], grads[2])
    np.testing.assert_array_equal(grads[1], grads[3])


def test_index_put_accumulate_repeats_still_sum():
    # (integer indices may repeat: they still go through add.at)
    idx = [2, 0, 2, 2]
    got = llgrad.zeros(4).index_put_((llgrad.tensor(idx),), llgrad.tensor([1., 2., 3., 4.]),
                                     accumulate=True)
    want = torch.zeros(4).index_put_((torch.tensor(idx),), torch.tensor([1., 2., 3., 4.]),
                                     accumulate=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.slow       # (3-15 s a model: the compiled step's build)
@pytest.mark.parametrize("name", ["bert", "conformer", "clip", "ctc", "node", "yolo"])
def test_eighth_models_train_as_torch(name):
    import os
    import sys
    import warnings
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import untuned_models_eighth as models
    losses, notes = {}, []
    for k, lib, wrap in (("torch", torch, None), ("eager", llgrad, None),
                         ("compiled", llgrad, llgrad.compile)):
        step = models.build(lib, name)[1]
        step = wrap(step) if wrap else step
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            losses[k] = [step().item() for _ in range(6)]
        notes += [str(w.message) for w in caught if "llgrad" in str(w.message)
                  and "compiled step" not in str(w.message)]
    # (HF's masking writes inputs[m] = random_words[m]: the count m selects changes each
    # step, a graph break in torch.compile; llgrad runs the step eagerly and says so)
    want = 1 if name == "bert" else 0
    assert len(notes) == want and all("changes from call to call" in n for n in notes), notes
    np.testing.assert_allclose(losses["eager"], losses["torch"], rtol=2e-5)
    np.testing.assert_allclose(losses["compiled"], losses["torch"], rtol=2e-5)


@pytest.mark.parametrize("shape", [(0, 2, 5), (3, 0, 5), (3, 2, 0), (0, 5)])
def test_ctc_loss_empty_log_probs_is_torchs_error(shape):
    # (the recursion read step 0 of no steps: an IndexError of its own words)
    n = shape[1] if len(shape) == 3 else 1
    for lib in (torch, llgrad):
        with pytest.raises(RuntimeError, match="log_probs tensor must not be empty"):
            lib.nn.functional.ctc_loss(lib.zeros(*shape), lib.ones(n, 1, dtype=lib.long),
                                       (0,) * n, (1,) * n)
