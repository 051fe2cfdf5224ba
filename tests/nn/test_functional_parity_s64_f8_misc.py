"""torch.nn.functional parity, non-spatial ops with unusual but legal arguments (helper f8):
embedding, one_hot, normalize, distances, attention, gumbel_softmax, normalisations and
losses. Values and gradients in float32 and float64 against PyTorch, eager and compiled
(compiled must equal eager)."""
import numpy as np
import pytest

from parity_harness_s64_f8 import boolean, check, compiled_params, ints, rnd

torch = pytest.importorskip("torch")


def F(L):
    return L.nn.functional


CASES = [
    ("one_hot_scaled", lambda L, i, x: F(L).one_hot(i, 5).to(x.dtype) * x,
     [ints([[0, 3], [4, 1]]), rnd(2, 2, 5)]),
    ("one_hot_infer", lambda L, i, x: F(L).one_hot(i).to(x.dtype) * x,
     [ints([2, 0, 2]), rnd(3, 3)]),
    ("embedding_padding_idx_neg", lambda L, i, w: F(L).embedding(i, w, padding_idx=-2),
     [ints([[0, 3, 2], [3, 1, 3]]), rnd(4, 3)]),
    ("normalize_p1", lambda L, x: F(L).normalize(x, p=1, dim=0), [rnd(3, 4)]),
    ("normalize_pinf", lambda L, x: F(L).normalize(x, p=float("inf"), dim=-1), [rnd(3, 4)]),
    ("normalize_dim_tuple", lambda L, x: F(L).normalize(x, p=2, dim=(1, 2)),
     [rnd(2, 3, 4)]),
    ("normalize_p3_eps", lambda L, x: F(L).normalize(x, p=3, dim=1, eps=10.),
     [rnd(2, 3)]),
    ("cosine_broadcast", lambda L, a, b: F(L).cosine_similarity(a, b, dim=-1),
     [rnd(3, 1, 4), rnd(2, 4, seed=1)]),
    ("cosine_dim0_eps", lambda L, a, b: F(L).cosine_similarity(a, b, dim=0, eps=0.5),
     [rnd(3, 2) * 0.1, rnd(3, 1, seed=1)]),
    ("pairwise_p1_keepdim", lambda L, a, b: F(L).pairwise_distance(a, b, p=1, keepdim=True),
     [rnd(3, 4), rnd(1, 4, seed=1)]),
    ("pairwise_pinf", lambda L, a, b: F(L).pairwise_distance(a, b, p=float("inf")),
     [rnd(3, 4), rnd(3, 4, seed=1)]),
    ("pairwise_p0_5_1d", lambda L, a, b: F(L).pairwise_distance(a, b, p=0.5, eps=1e-3),
     [rnd(4), rnd(4, seed=1)]),
    ("pdist_p2", lambda L, x: F(L).pdist(x), [rnd(5, 3)]),
    ("pdist_p1", lambda L, x: F(L).pdist(x, p=1), [rnd(4, 3)]),
    ("pdist_p3", lambda L, x: F(L).pdist(x, p=3), [rnd(4, 2)]),
    ("pdist_pinf", lambda L, x: F(L).pdist(x, p=float("inf")), [rnd(4, 3)]),
    ("pdist_p0", lambda L, x: F(L).pdist(x, p=0), [rnd(4, 3)]),
]
for p in (0, 1, 2, 3, float("inf")):
    CASES.append((f"cdist_p{p}", lambda L, a, b, p=p: L.cdist(a, b, p=p),
                  [rnd(2, 3, 4), rnd(1, 5, 4, seed=1)]))
for cm in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist",
           "use_mm_for_euclid_dist_if_necessary"):
    CASES.append((f"cdist_{cm}", lambda L, a, b, cm=cm: L.cdist(a, b, compute_mode=cm),
                  [rnd(3, 30, 4), rnd(3, 27, 4, seed=1)]))

_sdpa = lambda **kw: (lambda L, q, k, v, *m: F(L).scaled_dot_product_attention(  # noqa
    q, k, v, *m, **kw))
_Q, _K, _V = rnd(2, 3, 4, 5), rnd(2, 3, 6, 5, seed=1), rnd(2, 3, 6, 2, seed=2)
CASES += [
    ("sdpa_bool_mask", _sdpa(), [_Q, _K, _V, boolean(rnd(4, 6, seed=3) > -0.5)]),
    ("sdpa_float_mask_bcast", _sdpa(), [_Q, _K, _V, rnd(3, 1, 6, seed=3)]),
    ("sdpa_float_mask_grad", _sdpa(scale=0.3), [_Q, _K, _V, rnd(1, 4, 6, seed=3)]),
    ("sdpa_causal_L_lt_S", _sdpa(is_causal=True), [_Q, _K, _V]),
    ("sdpa_causal_L_gt_S", _sdpa(is_causal=True),
     [rnd(1, 2, 6, 3), rnd(1, 2, 4, 3, seed=1), rnd(1, 2, 4, 3, seed=2)]),
    ("sdpa_scale", _sdpa(scale=2.0), [_Q, _K, _V]),
    ("sdpa_gqa", _sdpa(enable_gqa=True),
     [rnd(1, 4, 3, 5), rnd(1, 2, 6, 5, seed=1), rnd(1, 2, 6, 3, seed=2)]),
    ("sdpa_gqa_causal", _sdpa(enable_gqa=True, is_causal=True, scale=0.5),
     [rnd(6, 3, 5), rnd(2, 4, 5, seed=1), rnd(2, 4, 3, seed=2)]),
    ("lrn_odd", lambda L, x: F(L).local_response_norm(x, 3, alpha=0.3, beta=0.6, k=1.5),
     [rnd(2, 5, 3)]),
    ("lrn_even_size_4d", lambda L, x: F(L).local_response_norm(x, 4, alpha=1.0, beta=1.2),
     [rnd(1, 6, 2, 3)]),
    ("lrn_5d", lambda L, x: F(L).local_response_norm(x, 2), [rnd(1, 3, 2, 2, 2)]),
    ("layer_norm_multi", lambda L, x, w, b: F(L).layer_norm(x, (3, 1, 5), w, b, eps=0.1),
     [rnd(2, 3, 1, 5), rnd(3, 1, 5, seed=1), rnd(3, 1, 5, seed=2)]),
    ("layer_norm_no_affine_1", lambda L, x: F(L).layer_norm(x, (1,)), [rnd(4, 1)]),
    ("group_norm_odd", lambda L, x, w, b: F(L).group_norm(x, 3, w, b, eps=1e-3),
     [rnd(2, 6, 1, 3, 2), rnd(6, seed=1), rnd(6, seed=2)]),
    ("group_norm_3d_one_group", lambda L, x: F(L).group_norm(x, 1), [rnd(3, 4, 5)]),
    ("instance_norm_running", lambda L, x, rm, rv: F(L).instance_norm(
        x, rm.clone(), rv.clone(), use_input_stats=True, momentum=0.3),
     [rnd(2, 3, 5), ("const", rnd(3, seed=1)), ("const", rnd(3, seed=2, lo=0.5))]),
    ("instance_norm_eval_stats", lambda L, x, rm, rv, w: F(L).instance_norm(
        x, rm, rv, w, use_input_stats=False),
     [rnd(2, 3, 2, 2), ("const", rnd(3, seed=1)), ("const", rnd(3, seed=2, lo=0.5)),
      rnd(3, seed=3)]),
    ("instance_norm_affine_1px", lambda L, x, w, b: F(L).instance_norm(x, weight=w, bias=b),
     [rnd(2, 3, 4, 1), rnd(3, seed=1), rnd(3, seed=2)]),
]

_LP = rnd(7, 2, 5, seed=9)
for red in ("none", "mean", "sum"):
    for zi in (False, True):
        # target 1 is too long for its input (3 frames, 3 labels with a repeat): infinite loss
        CASES.append((f"ctc_{red}_zi{int(zi)}", lambda L, x, t, il, tl, red=red, zi=zi:
                      F(L).ctc_loss(x.log_softmax(-1), t, il, tl, reduction=red,
                                    zero_infinity=zi),
                      [_LP, ints([[1, 2, 2], [3, 3, 3]]), ints([7, 3]), ints([2, 3])]))
CASES.append(("ctc_1d_targets_blank2", lambda L, x, t, il, tl: F(L).ctc_loss(
    x.log_softmax(-1), t, il, tl, blank=2), [_LP, ints([1, 3, 4, 1, 1]), ints([6, 7]),
                                             ints([3, 2])]))
for red in ("none", "mean", "sum"):
    CASES += [
        (f"poisson_log_{red}", lambda L, x, y, red=red: F(L).poisson_nll_loss(
            x, y, reduction=red), [rnd(3, 4), rnd(3, 4, seed=1, lo=0.)]),
        (f"poisson_full_{red}", lambda L, x, y, red=red: F(L).poisson_nll_loss(
            x, y, log_input=False, full=True, eps=0.1, reduction=red),
         [rnd(3, 4, lo=0.1), rnd(3, 4, seed=1, lo=0.) * 2]),
        (f"gaussian_var_bcast_{red}", lambda L, x, y, v, red=red: F(L).gaussian_nll_loss(
            x, y, v, reduction=red), [rnd(3, 4), rnd(3, 4, seed=1), rnd(3, 1, seed=2, lo=0.1)]),
        (f"gaussian_var_full_eps_{red}", lambda L, x, y, v, red=red: F(L).gaussian_nll_loss(
            x, y, v, full=True, eps=0.5, reduction=red),
         [rnd(2, 3), rnd(2, 3, seed=1), rnd(2, 3, seed=2, lo=0.) * 0.3]),
        (f"huber_beta0_{red}", lambda L, x, y, red=red: F(L).huber_loss(
            x, y, delta=1e-12, reduction=red), [rnd(3, 4), rnd(3, 4, seed=1)]),
        (f"smooth_l1_beta0_{red}", lambda L, x, y, red=red: F(L).smooth_l1_loss(
            x, y, beta=0.0, reduction=red), [rnd(3, 4), rnd(3, 4, seed=1)]),
        (f"kl_log_target_{red}", lambda L, x, y, red=red: F(L).kl_div(
            x, y, reduction=red, log_target=True), [rnd(3, 4), rnd(3, 4, seed=1)]),
        (f"kl_batchmean_{red}", lambda L, x, y, red=red: F(L).kl_div(
            x, y, reduction="batchmean" if red == "mean" else red),
         [rnd(3, 4), rnd(3, 4, seed=1, lo=0.)]),
    ]
CASES += [
    ("margin_ranking_none", lambda L, a, b, y: F(L).margin_ranking_loss(
        a, b, y, margin=0.3, reduction="none"),
     [rnd(5), rnd(5, seed=1), ("const", np.array([1., -1, 1, -1, 1]))]),
    ("hinge_embedding_none", lambda L, x, y: F(L).hinge_embedding_loss(
        x, y, margin=0.5, reduction="none"), [rnd(2, 3), ("const", np.sign(rnd(2, 3, seed=1)))]),
    ("multi_margin_p2_w_none", lambda L, x, y, w: F(L).multi_margin_loss(
        x, y, p=2, margin=0.7, weight=w, reduction="none"),
     [rnd(4, 5), ints([0, 4, 2, 2]), ("const", rnd(5, seed=2, lo=0.1))]),
    ("multi_margin_1d_none", lambda L, x, y: F(L).multi_margin_loss(x, y, reduction="none"),
     [rnd(5), ints(3)]),
    ("multilabel_margin_none", lambda L, x, y: F(L).multilabel_margin_loss(
        x, y, reduction="none"), [rnd(3, 4), ints([[3, 0, -1, 1], [-1, 2, 1, 0], [1, 2, 0, 3]])]),
    ("soft_margin_none", lambda L, x, y: F(L).soft_margin_loss(x, y, reduction="none"),
     [rnd(3, 4), ("const", np.sign(rnd(3, 4, seed=1)))]),
    ("multilabel_soft_margin_w_none", lambda L, x, y, w: F(L).multilabel_soft_margin_loss(
        x, y, weight=w, reduction="none"),
     [rnd(3, 4), ("const", (rnd(3, 4, seed=1) > 0) * 1.), rnd(4, seed=2)]),
    ("cosine_embedding_none", lambda L, a, b, y: F(L).cosine_embedding_loss(
        a, b, y, margin=-0.2, reduction="none"),
     [rnd(4, 3), rnd(4, 3, seed=1), ("const", np.array([1., -1, -1, 1]))]),
    ("triplet_swap_none", lambda L, a, p, n: F(L).triplet_margin_loss(
        a, p, n, margin=0.5, p=1, swap=True, reduction="none"),
     [rnd(4, 3), rnd(4, 3, seed=1), rnd(4, 3, seed=2)]),
    ("triplet_distfn_none", lambda L, a, p, n: F(L).triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda x, y: 1 - F(L).cosine_similarity(x, y),
        margin=0.4, swap=True, reduction="none"),
     [rnd(4, 3), rnd(4, 3, seed=1), rnd(4, 3, seed=2)]),
]


# degenerate points: repeated rows (zero distances), zero vectors, ties
_DUP = np.concatenate([rnd(2, 3), rnd(2, 3)[:1], np.zeros((1, 3))])
_Z = np.concatenate([rnd(2, 3), np.zeros((1, 3))])
CASES += [
    ("one_hot_neg1", lambda L, i, x: F(L).one_hot(i, -1).to(x.dtype) * x,
     [ints([1, 3]), rnd(2, 4)]),
    ("normalize_zero_row", lambda L, x: F(L).normalize(x, dim=1), [_Z]),
    ("normalize_pinf_zero_row", lambda L, x: F(L).normalize(x, p=float("inf"), dim=1), [_Z]),
    ("cosine_zero_vector", lambda L, a, b: F(L).cosine_similarity(a, b),
     [_Z, rnd(1, 3, seed=1)]),
    ("pairwise_equal_rows", lambda L, a, b: F(L).pairwise_distance(a, b, eps=0.),
     [_DUP, ("const", _DUP)]),
    ("pdist_dup_rows_p2", lambda L, x: F(L).pdist(x), [_DUP]),
    ("pdist_dup_rows_p1", lambda L, x: F(L).pdist(x, p=1), [_DUP]),
    ("pdist_dup_rows_pinf", lambda L, x: F(L).pdist(x, p=float("inf")), [_DUP]),
    ("pdist_dup_rows_p0_5", lambda L, x: F(L).pdist(x, p=0.5), [_DUP + 0.01 * rnd(4, 3)]),
    ("cdist_p0_5", lambda L, a, b: L.cdist(a, b, p=0.5), [rnd(3, 4), rnd(2, 4, seed=1)]),
    ("cdist_p1_5_dup", lambda L, a, b: L.cdist(a, b, p=1.5), [_DUP, _DUP[1:] + 0.]),
    ("cdist_dup_p2", lambda L, a, b: L.cdist(a, b), [_DUP, _DUP[::-1] + 0.]),
    ("cdist_dup_pinf", lambda L, a, b: L.cdist(a, b, p=float("inf")), [_DUP, _DUP + 0.]),
    ("cdist_empty_rows", lambda L, a, b: L.cdist(a, b), [rnd(0, 3), rnd(2, 3)]),
    # ties at the maximum: ATen's cdist/pdist backward gives each the full sign(diff)
    ("pdist_ties_pinf", lambda L, x: F(L).pdist(x, p=float("inf")),
     [np.array([[0., 1], [1., 0], [2, 2], [2, -1]])]),
    ("cdist_ties_pinf", lambda L, a, b: L.cdist(a, b, p=float("inf")),
     [np.array([[0., 1], [1., 0]]), np.array([[1., 2], [2., 1], [0., 0]])]),
    ("cdist_ties_pinf_batched", lambda L, a, b: L.cdist(a, b, p=float("inf")),
     [np.array([[[0., 1, 3]], [[1., 0, -1]]]), np.array([[1., 2, 2], [3., 3, 0]])]),
    ("pairwise_ties_pinf", lambda L, a, b: F(L).pairwise_distance(a, b, p=float("inf"),
                                                                  eps=0.),
     [np.array([[0., 1], [1., 0]]), np.array([[1., 2], [2., 1]])]),
    ("sdpa_fully_masked_row", _sdpa(),
     [_Q, _K, _V, boolean(np.arange(24).reshape(4, 6) >= 6)]),
    ("sdpa_neg_inf_float_row", _sdpa(),
     [_Q, _K, _V, ("const", np.where(np.arange(24).reshape(4, 6) % 7 == 0, -np.inf, 0.))]),
    ("sdpa_causal_L1", _sdpa(is_causal=True),
     [rnd(2, 1, 4), rnd(2, 3, 4, seed=1), rnd(2, 3, 2, seed=2)]),
    ("lrn_size_gt_channels", lambda L, x: F(L).local_response_norm(x, 7, k=0.5),
     [rnd(2, 3, 4)]),
    ("group_norm_2d_input", lambda L, x, w: F(L).group_norm(x, 2, w), [rnd(3, 4), rnd(4)]),
    ("gaussian_var_homoscedastic", lambda L, x, y, v: F(L).gaussian_nll_loss(x, y, v),
     [rnd(3, 4), rnd(3, 4, seed=1), rnd(3, seed=2, lo=0.1)]),
    ("gaussian_var_3d_hetero", lambda L, x, y, v: F(L).gaussian_nll_loss(
        x, y, v, reduction="none"),
     [rnd(2, 3, 4), rnd(2, 3, 4, seed=1), rnd(2, 3, 1, seed=2, lo=0.1)]),
    ("poisson_full_zero_targets", lambda L, x, y: F(L).poisson_nll_loss(
        x, y, full=True, reduction="none"), [rnd(5), ("const", np.array([0., 1, 1.5, 3, 0]))]),
    ("kl_zero_target", lambda L, x, y: F(L).kl_div(x, y, reduction="none"),
     [rnd(2, 3), np.array([[0., 0.5, 0.5], [1., 0, 0]])]),
    ("smooth_l1_beta0_ties", lambda L, x, y: F(L).smooth_l1_loss(
        x, y, beta=0.0, reduction="none"), [np.array([1., 2, 3]), np.array([1., 0, 3])]),
    ("huber_ties", lambda L, x, y: F(L).huber_loss(x, y, delta=0.5, reduction="none"),
     [np.array([1., 2, 3]), np.array([1., 0, 2.5])]),
    ("ctc_zero_length_target", lambda L, x, t, il, tl: F(L).ctc_loss(
        x.log_softmax(-1), t, il, tl, reduction="none"),
     [_LP, ints([[1, 2], [3, 3]]), ints([4, 7]), ints([0, 2])]),
    ("ctc_sum_short_inputs", lambda L, x, t, il, tl: F(L).ctc_loss(
        x.log_softmax(-1), t, il, tl, reduction="mean", zero_infinity=True),
     [_LP, ints([[1, 1, 1], [2, 3, 4]]), ints([5, 2]), ints([3, 3])]),
    ("multilabel_margin_leading_neg1", lambda L, x, y: F(L).multilabel_margin_loss(
        x, y, reduction="none"), [rnd(2, 3), ints([[-1, 0, 1], [2, 2, -1]])]),
    ("margin_ranking_ties", lambda L, a, b, y: F(L).margin_ranking_loss(
        a, b, y, reduction="none"), [np.array([1., 2, 3]), np.array([1., 2.5, 3]),
                                     ("const", np.array([1., -1, -1]))]),
]

# a few cases compiled in the default run, one per family; all of them under -m slow
COMPILED_FAST = [
    'cdist_p0', 'cdist_ties_pinf', 'sdpa_gqa_causal', 'ctc_mean_zi1',
    'gaussian_var_bcast_mean',
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,fn,specs", CASES, ids=[c[0] for c in CASES])
def test_eager_matches_torch(name, fn, specs, dtype):
    check(fn, specs, dtype, compiled=False)


@pytest.mark.parametrize("name,fn,specs", compiled_params(CASES, COMPILED_FAST))
def test_compiled_matches_eager(name, fn, specs):
    check(fn, specs, np.float32, torch_oracle=False)


@pytest.mark.parametrize("lib", ["torch", "llgrad"])
def test_cdist_p0_gives_its_inputs_zero_gradients_not_none(lib):
    """Regression: llgrad's cdist(p=0) left .grad None; ATen's backward writes zeros."""
    import llgrad
    L = torch if lib == "torch" else llgrad
    a = L.tensor(rnd(3, 4), requires_grad=True)
    b = L.tensor(rnd(2, 4, seed=1), requires_grad=True)
    L.cdist(a, b, p=0).sum().backward()
    assert a.grad is not None and b.grad is not None
    assert not a.grad.numpy().any() and not b.grad.numpy().any()


@pytest.mark.parametrize("lib", ["torch", "llgrad"])
def test_cdist_pdist_pinf_give_every_tied_maximum_the_full_gradient(lib):
    """Regression: llgrad's cdist / pdist (p=inf) split the gradient evenly among tied
    maxima, as linalg.vector_norm does; ATen's _cdist_backward / _pdist_backward give each
    tied element sign(diff) (a silent wrong gradient)."""
    import llgrad
    L = torch if lib == "torch" else llgrad
    a = L.tensor([[0., 1], [1., 0]], requires_grad=True)
    L.cdist(a, L.tensor([[1., 2]]), p=float("inf")).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[-1., -1], [0., -1]])
    a.grad = None
    L.nn.functional.pdist(a, p=float("inf")).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[-1., 1], [1., -1]])
