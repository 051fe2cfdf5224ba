"""Exception parity with torch, sweep 22 (H1), nn / optim / data: Linear given other features,
load_state_dict of missing / unexpected / misshapen keys (strict and not), optimisers of
non-leaves / no / duplicated parameters, schedulers of a non-optimizer, DataLoader batch sizes
and samplers, losses of mismatched shapes (and mse_loss's UserWarning), BatchNorm of one
sample. Fixed here: mse_loss / smooth_l1_loss / huber_loss of integer tensors (an integer
loss, rounded down; torch's NotImplementedError), huber_loss of an integer input and a float
target (torch's RuntimeError)."""
import pytest

torch = pytest.importorskip("torch")

from exceptions_sweep22_h1_harness import check  # noqa: E402

def _sd_missing(L, strict):
    m = L.nn.Linear(2, 2)
    sd = {"weight": L.zeros(2, 2)}
    return m.load_state_dict(sd, strict=strict)


def _sd_unexpected(L, strict):
    m = L.nn.Linear(2, 2)
    sd = dict(m.state_dict())
    sd["extra"] = L.zeros(1)
    return m.load_state_dict(sd, strict=strict)


def _sd_shape(L, strict):
    m = L.nn.Linear(2, 2)
    sd = {"weight": L.zeros(3, 2), "bias": L.zeros(2)}
    return m.load_state_dict(sd, strict=strict)


def _sd_not_dict(L):
    return L.nn.Linear(2, 2).load_state_dict([1, 2])


def _sd_not_tensor(L):
    return L.nn.Linear(2, 2).load_state_dict({"weight": [[0., 0.], [0., 0.]], "bias": L.zeros(2)})


def _sd_nested_missing(L):
    m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.ReLU(), L.nn.Linear(2, 1))
    sd = dict(m.state_dict())
    del sd["2.bias"]
    return m.load_state_dict(sd)


def _sd_bn_shape(L):
    m = L.nn.BatchNorm1d(3)
    sd = dict(m.state_dict())
    sd["running_mean"] = L.zeros(4)
    return m.load_state_dict(sd)


def _opt_sd_mismatch(L):
    a = L.ones(2, requires_grad=True)
    b = L.ones(2, requires_grad=True)
    o1 = L.optim.SGD([a], lr=0.1)
    o2 = L.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1)
    o1.load_state_dict(o2.state_dict())


def _opt_sd_size(L):
    a = L.ones(2, requires_grad=True)
    b = L.ones(2, requires_grad=True)
    o1 = L.optim.SGD([a], lr=0.1)
    o2 = L.optim.SGD([a, b], lr=0.1)
    o1.load_state_dict(o2.state_dict())


def _opt_nonleaf(L):
    w = L.ones(2, requires_grad=True) * 2
    return L.optim.SGD([w], lr=0.1)


def _opt_no_grad_param_ok(L):
    return L.optim.SGD([L.ones(2)], lr=0.1)


def _opt_dup(L):
    w = L.ones(2, requires_grad=True)
    return L.optim.SGD([w, w], lr=0.1)


def _opt_dup_groups(L):
    w = L.ones(2, requires_grad=True)
    return L.optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)


def _opt_add_group_dup(L):
    w = L.ones(2, requires_grad=True)
    o = L.optim.SGD([w], lr=0.1)
    o.add_param_group({"params": [w]})


def _opt_set(L):
    w = L.ones(2, requires_grad=True)
    return L.optim.SGD({w}, lr=0.1)


def _opt_tensor(L):
    w = L.ones(2, requires_grad=True)
    return L.optim.SGD(w, lr=0.1)


def _opt_group_no_lr(L):
    w = L.ones(2, requires_grad=True)
    return L.optim.SGD([{"params": [w]}])


def _sched_wrong_type(L):
    return L.optim.lr_scheduler.StepLR(L.nn.Linear(2, 2), 1)


def _sched_wrong_type2(L):
    return L.optim.lr_scheduler.LambdaLR("opt", lambda e: 1.)


def _sched_lambda_count(L):
    w = L.ones(2, requires_grad=True)
    o = L.optim.SGD([w], lr=0.1)
    return L.optim.lr_scheduler.LambdaLR(o, [lambda e: 1., lambda e: 1.])


def _sched_cosine_neg(L):
    w = L.ones(2, requires_grad=True)
    o = L.optim.SGD([w], lr=0.1)
    return L.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=0)


def _sched_onecycle_steps(L):
    w = L.ones(2, requires_grad=True)
    o = L.optim.SGD([w], lr=0.1)
    s = L.optim.lr_scheduler.OneCycleLR(o, max_lr=1., total_steps=2)
    for _ in range(4):
        o.step()
        s.step()


def _sched_plateau_mode(L):
    w = L.ones(2, requires_grad=True)
    o = L.optim.SGD([w], lr=0.1)
    return L.optim.lr_scheduler.ReduceLROnPlateau(o, mode="middle")


def _sched_multistep_unsorted_ok(L):
    w = L.ones(2, requires_grad=True)
    o = L.optim.SGD([w], lr=0.1)
    return L.optim.lr_scheduler.MultiStepLR(o, [3, 1]).get_last_lr()


def _dl(L, **kw):
    ds = L.utils.data.TensorDataset(L.arange(6.))
    return list(L.utils.data.DataLoader(ds, **kw))


def _dl_sampler_shuffle(L):
    ds = L.utils.data.TensorDataset(L.arange(6.))
    return L.utils.data.DataLoader(ds, sampler=L.utils.data.SequentialSampler(ds), shuffle=True)


def _dl_batch_sampler_bs(L):
    ds = L.utils.data.TensorDataset(L.arange(6.))
    bs = L.utils.data.BatchSampler(L.utils.data.SequentialSampler(ds), 2, False)
    return L.utils.data.DataLoader(ds, batch_sampler=bs, batch_size=3)


def _dl_batch_sampler_drop_last(L):
    ds = L.utils.data.TensorDataset(L.arange(6.))
    bs = L.utils.data.BatchSampler(L.utils.data.SequentialSampler(ds), 2, False)
    return L.utils.data.DataLoader(ds, batch_sampler=bs, drop_last=True)


def _dl_ragged(L):
    class DS(L.utils.data.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return L.ones(i + 1)
    return list(L.utils.data.DataLoader(DS(), batch_size=2))


def _dl_index_error(L):
    class DS(L.utils.data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return [1., 2.][i]
    return list(L.utils.data.DataLoader(DS(), batch_size=1))


def _tensor_dataset_sizes(L):
    return L.utils.data.TensorDataset(L.ones(3), L.ones(4))


def _random_split_sum(L):
    return L.utils.data.random_split(L.utils.data.TensorDataset(L.ones(4)), [1, 2])


def _bn_batch1(L):
    return L.nn.BatchNorm1d(3)(L.ones(1, 3))


def _bn2d_batch1_ok(L):
    return L.nn.BatchNorm2d(3)(L.ones(1, 3, 2, 2))


def _bn2d_batch1_1x1(L):
    return L.nn.BatchNorm2d(3)(L.ones(1, 3, 1, 1))


def _bn_batch1_eval_ok(L):
    return L.nn.BatchNorm1d(3).eval()(L.ones(1, 3))


def _bn_fn_batch1(L):
    return L.nn.functional.batch_norm(L.ones(1, 3), None, None, training=True)


CASES = [
    ("load_sd_missing_strict", lambda L: _sd_missing(L, True)),
    ("load_sd_missing_nonstrict_ok", lambda L: tuple(map(list, _sd_missing(L, False)))),
    ("load_sd_unexpected_strict", lambda L: _sd_unexpected(L, True)),
    ("load_sd_unexpected_nonstrict_ok", lambda L: tuple(map(list, _sd_unexpected(L, False)))),
    ("load_sd_shape_strict", lambda L: _sd_shape(L, True)),
    ("load_sd_shape_nonstrict", lambda L: _sd_shape(L, False)),
    ("load_sd_not_dict", _sd_not_dict),
    ("load_sd_not_tensor", _sd_not_tensor),
    ("load_sd_nested_missing", _sd_nested_missing),
    ("load_sd_bn_shape", _sd_bn_shape),
    ("opt_load_sd_groups", _opt_sd_mismatch),
    ("opt_load_sd_sizes", _opt_sd_size),
    ("opt_nonleaf", _opt_nonleaf),
    ("opt_no_grad_param_ok", lambda L: _opt_no_grad_param_ok(L) and "ok"),
    ("opt_empty", lambda L: L.optim.SGD([], lr=0.1)),
    ("opt_empty_adam", lambda L: L.optim.Adam([])),
    ("opt_empty_generator", lambda L: L.optim.SGD(L.nn.Sequential().parameters(), lr=0.1)),
    ("opt_dup", lambda L: _opt_dup(L) and "ok"),
    ("opt_dup_groups", _opt_dup_groups),
    ("opt_add_group_dup", _opt_add_group_dup),
    ("opt_set", _opt_set),
    ("opt_tensor", _opt_tensor),
    ("opt_neg_lr", lambda L: L.optim.SGD([L.ones(1, requires_grad=True)], lr=-1)),
    ("opt_neg_momentum", lambda L:
        L.optim.SGD([L.ones(1, requires_grad=True)], lr=0.1, momentum=-1)),
    ("opt_nesterov_no_momentum", lambda L:
        L.optim.SGD([L.ones(1, requires_grad=True)], lr=0.1, nesterov=True)),
    ("opt_adam_beta", lambda L: L.optim.Adam([L.ones(1, requires_grad=True)], betas=(1.0, 0.9))),
    ("opt_adam_eps", lambda L: L.optim.Adam([L.ones(1, requires_grad=True)], eps=-1)),
    ("opt_adam_wd", lambda L: L.optim.AdamW([L.ones(1, requires_grad=True)], weight_decay=-1)),
    ("opt_sgd_no_lr_ok", lambda L: L.optim.SGD([L.ones(1, requires_grad=True)]) and "ok"),
    ("opt_int_param", lambda L: L.optim.SGD([L.ones(1, dtype=L.long)], lr=0.1)),
    ("opt_group_no_lr_ok", lambda L: _opt_group_no_lr(L) and "ok"),
    ("opt_rmsprop_alpha", lambda L: L.optim.RMSprop([L.ones(1, requires_grad=True)], alpha=-1)),
    ("sched_wrong_type", _sched_wrong_type),
    ("sched_wrong_type_str", _sched_wrong_type2),
    ("sched_lambda_count", _sched_lambda_count),
    ("sched_cosine_T0", _sched_cosine_neg),
    ("sched_onecycle_steps", _sched_onecycle_steps),
    ("sched_plateau_mode", _sched_plateau_mode),
    ("sched_multistep_unsorted_ok", _sched_multistep_unsorted_ok),
    ("dl_batch_size_0", lambda L: _dl(L, batch_size=0)),
    ("dl_batch_size_neg", lambda L: _dl(L, batch_size=-1)),
    ("dl_batch_size_float", lambda L: _dl(L, batch_size=1.5)),
    ("dl_sampler_shuffle", _dl_sampler_shuffle),
    ("dl_batch_sampler_bs", _dl_batch_sampler_bs),
    ("dl_batch_sampler_drop_last", _dl_batch_sampler_drop_last),
    ("dl_num_workers_neg", lambda L: _dl(L, num_workers=-1)),
    ("dl_ragged", _dl_ragged),
    ("dl_index_error", _dl_index_error),
    ("tensor_dataset_sizes", _tensor_dataset_sizes),
    ("random_split_sum", _random_split_sum),
    ("batch_sampler_bs_0", lambda L: L.utils.data.BatchSampler(range(3), 0, False)),
    ("random_sampler_num_samples", lambda L: L.utils.data.RandomSampler(range(3), num_samples=0)),
    ("mse_shape_mismatch", lambda L: L.nn.functional.mse_loss(L.ones(2, 3), L.ones(2, 4))),
    ("l1_shape_mismatch", lambda L: L.nn.functional.l1_loss(L.ones(2, 3), L.ones(4))),
    ("bce_shape", lambda L: L.nn.functional.binary_cross_entropy(L.ones(2) * 0.5, L.ones(3))),
    ("bce_out_of_range", lambda L: L.nn.functional.binary_cross_entropy(L.ones(2) * 2, L.ones(2))),
    ("bce_logits_shape", lambda L:
        L.nn.functional.binary_cross_entropy_with_logits(L.ones(2), L.ones(3))),
    ("bce_int_target", lambda L:
        L.nn.functional.binary_cross_entropy(L.ones(2) * 0.5, L.ones(2, dtype=L.long))),
    ("bce_logits_int_target", lambda L:
        L.nn.functional.binary_cross_entropy_with_logits(L.ones(2), L.ones(2, dtype=L.long))),
    ("MSELoss_shape_mismatch", lambda L: L.nn.MSELoss()(L.ones(3), L.ones(2, 3))),
    ("smooth_l1_shape", lambda L: L.nn.functional.smooth_l1_loss(L.ones(2), L.ones(3))),
    ("kl_div_shape", lambda L: L.nn.functional.kl_div(L.ones(2), L.ones(3))),
    ("huber_shape", lambda L: L.nn.functional.huber_loss(L.ones(2), L.ones(3))),
    ("loss_bad_reduction", lambda L:
        L.nn.functional.mse_loss(L.ones(2), L.ones(2), reduction="avg")),
    ("CrossEntropyLoss_bad_reduction", lambda L:
        L.nn.CrossEntropyLoss(reduction="avg")(L.ones(2, 3), L.tensor([0, 1]))),
    ("cross_entropy_label_smoothing", lambda L:
        L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, 1]), label_smoothing=1.5)),
    ("nll_loss_float_target_module", lambda L: L.nn.NLLLoss()(L.ones(2, 3), L.ones(2))),
    ("nll_loss_1d_input_ok", lambda L: L.nn.functional.nll_loss(L.ones(3), L.tensor(0))),
    ("nll_loss_3d_target", lambda L:
        L.nn.functional.nll_loss(L.ones(2, 3), L.zeros(2, 1, dtype=L.long))),
    ("bn_batch1", _bn_batch1),
    ("bn2d_batch1_ok", lambda L: _bn2d_batch1_ok(L).shape),
    ("bn2d_batch1_1x1", _bn2d_batch1_1x1),
    ("bn_batch1_eval_ok", lambda L: _bn_batch1_eval_ok(L).shape),
    ("bn_fn_batch1", _bn_fn_batch1),
    ("instance_norm_1", lambda L: L.nn.functional.instance_norm(L.ones(2, 3, 1))),
    ("dropout_p", lambda L: L.nn.Dropout(1.5)),
    ("dropout_fn_p", lambda L: L.nn.functional.dropout(L.ones(2), p=-0.1)),
    ("Linear_neg_features", lambda L: L.nn.Linear(-1, 2)),
    ("Embedding_neg", lambda L: L.nn.Embedding(-1, 2)),
    ("clip_grad_norm_type", lambda L:
        L.nn.utils.clip_grad_norm_([L.ones(2, requires_grad=True)], "x")),
    ("mse_int_sum", lambda L:
        L.nn.functional.mse_loss(L.tensor([1, 2]), L.tensor([2, 4]), reduction="sum")),
    ("mse_bool", lambda L: L.nn.functional.mse_loss(L.tensor([True]), L.tensor([False]))),
    ("mse_int_float_ok", lambda L: L.nn.functional.mse_loss(L.tensor([1, 2]), L.tensor([2., 4.]))),
    ("smooth_l1_int", lambda L: L.nn.functional.smooth_l1_loss(L.tensor([1, 2]), L.tensor([2, 4]))),
    ("huber_int", lambda L: L.nn.functional.huber_loss(L.tensor([1, 2]), L.tensor([2, 4]))),
    ("huber_int_input_float_target", lambda L:
        L.nn.functional.huber_loss(L.tensor([1, 2]), L.tensor([2., 4.]))),
    ("huber_float_input_int_target_ok", lambda L:
        L.nn.functional.huber_loss(L.tensor([1., 2.]), L.tensor([2, 4]))),
    ("conv1d_groups_div", lambda L:
        L.nn.functional.conv1d(L.ones(1, 4, 5), L.ones(3, 2, 3), groups=2)),
    ("dropout2d_1d_fn", lambda L: L.nn.functional.dropout2d(L.ones(4))),
    ("dropout2d_1d_eval_ok", lambda L: L.nn.functional.dropout2d(L.ones(4), training=False)),
    ("dropout2d_1d_p1_ok", lambda L: L.nn.functional.dropout2d(L.ones(4), p=1.)),
    ("module_cuda", lambda L: L.nn.Linear(2, 2).cuda()),
    ("zeros_cuda", lambda L: L.zeros(2, device="cuda")),
]


# cases where llgrad's first line is its own (torch's class, its own words)
_OWN_WORDS = {"module_cuda", "zeros_cuda"}


@pytest.mark.parametrize("name,fn", CASES, ids=[n for n, _ in CASES])
def test_raises_as_torch(name, fn):
    check(fn, torch, own_words=name in _OWN_WORDS)
