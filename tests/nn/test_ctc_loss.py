"""F.ctc_loss and nn.CTCLoss against torch: padded and concatenated targets, lengths as
tensors and as tuples, repeated labels, empty targets, a blank other than 0, the three
reductions, impossible alignments (inf, or zero with zero_infinity), unbatched input;
values and the gradients of log_probs and of the logits before log_softmax (PyTorch's
backward formula); compiled == eager."""
import warnings

import numpy as np
import pytest

import llgrad

RNG = np.random.default_rng(3)
T, N, C = 9, 4, 5
LOGITS = RNG.standard_normal((T, N, C))
PADDED = RNG.integers(1, C, (N, 4))
PADDED[0, 1] = PADDED[0, 2]             # a repeated label: a blank must separate the two
TARGET_LENGTHS = (3, 4, 0, 2)
FLAT = np.concatenate([PADDED[i, :n] for i, n in enumerate(TARGET_LENGTHS)])

CASES = [
    dict(targets=PADDED, input_lengths=[9, 8, 5, 9], target_lengths=TARGET_LENGTHS),
    dict(targets=FLAT, input_lengths=(9, 8, 5, 9), target_lengths=TARGET_LENGTHS,
         lengths_as=tuple, reduction="none"),
    dict(targets=FLAT, input_lengths=[9, 9, 9, 7], target_lengths=TARGET_LENGTHS,
         reduction="sum"),
    dict(targets=PADDED - 1, input_lengths=[9, 8, 5, 9], target_lengths=TARGET_LENGTHS,
         blank=C - 1),
    # (sample 1 needs 5 steps for its 4 labels with a repeat: 2 make it impossible)
    dict(targets=PADDED, input_lengths=[9, 2, 5, 9], target_lengths=TARGET_LENGTHS,
         zero_infinity=True),
    dict(targets=PADDED, input_lengths=[9, 2, 5, 9], target_lengths=TARGET_LENGTHS,
         reduction="none"),
]


def _run(lib, case, dtype):
    logits = lib.tensor(LOGITS, dtype=dtype, requires_grad=True)
    log_probs = logits.log_softmax(2)
    log_probs.retain_grad()
    as_lengths = case.get("lengths_as", lambda v: lib.tensor(list(v)))
    loss = lib.nn.functional.ctc_loss(
        log_probs, lib.tensor(case["targets"]), as_lengths(case["input_lengths"]),
        as_lengths(case["target_lengths"]), blank=case.get("blank", 0),
        reduction=case.get("reduction", "mean"), zero_infinity=case.get("zero_infinity", False))
    finite = loss[loss.isfinite()] if loss.dim() else loss
    finite.sum().backward()
    return loss.detach().numpy(), log_probs.grad.numpy(), logits.grad.numpy()


@pytest.mark.parametrize("case", range(len(CASES)))
def test_ctc_loss_matches_torch(case):
    torch = pytest.importorskip("torch")
    for dtype, tol in (("float64", 1e-10), ("float32", 2e-5)):
        ours = _run(llgrad, CASES[case], getattr(llgrad, dtype))
        theirs = _run(torch, CASES[case], getattr(torch, dtype))
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape and a.dtype == b.dtype
            # (torch's gradient of an impossible sample is NaN or inf: not compared)
            keep = np.isfinite(b)
            np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
            np.testing.assert_allclose(a[keep], b[keep], rtol=tol, atol=tol)


def test_ctc_module_and_unbatched_input():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((6, C))
    got = []
    for lib in (llgrad, torch):
        lp = lib.tensor(x).log_softmax(1)
        module = lib.nn.CTCLoss(blank=0, reduction="sum")
        got.append((module(lp, lib.tensor([1, 2, 2]), (6,), (3,)).item(),
                    lib.nn.functional.ctc_loss(lp, lib.tensor([3]), (6,), (1,)).item()))
        with pytest.raises(TypeError):
            lib.nn.functional.ctc_loss(lp, lib.tensor([3]), 6, 1)
    np.testing.assert_allclose(got[0], got[1], rtol=1e-12)


def test_ctc_compiled_equals_eager():
    def step(logits, targets, input_lengths, target_lengths):
        loss = llgrad.nn.functional.ctc_loss(logits.log_softmax(2), targets, input_lengths,
                                             target_lengths)
        loss.backward()
        return loss

    runs = []
    for fn in (step, llgrad.compile(step)):
        for _ in range(2):
            logits = llgrad.tensor(LOGITS, requires_grad=True)
            with warnings.catch_warnings():
                warnings.simplefilter("error")          # (no graph break)
                loss = fn(logits, llgrad.tensor(PADDED), llgrad.tensor([9, 8, 5, 9]),
                          llgrad.tensor(list(TARGET_LENGTHS)))
        runs.append((loss.item(), logits.grad.numpy()))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-12)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-10, atol=1e-12)
