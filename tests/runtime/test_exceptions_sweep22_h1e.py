"""Exception parity with torch, sweep 22 (H1), the rest of a tutorial's API: modules' own
checks, devices, save / load, hooks, custom Functions, linear algebra, recurrent and attention
layers, init, rnn utilities, datasets. Fixed here: .cuda() / .to("cuda") (RuntimeError only;
torch's CPU build raises AssertionError: now both), llgrad.load of bytes that are no
checkpoint (torch's pickle.UnpicklingError too), Dropout2d of a 1-D input (ran; torch's
RuntimeError), default_collate / stack / cat of a list holding a non-tensor (a RuntimeError
from comparing tensors; torch's TypeError)."""
import pytest

torch = pytest.importorskip("torch")

from exceptions_sweep22_h1_harness import check  # noqa: E402

import io


def _save_lambda(L):
    L.save(lambda x: x, io.BytesIO())


def _load_garbage(L):
    return L.load(io.BytesIO(b"garbage"), weights_only=True)


def _no_grad_backward(L):
    x = L.ones(2, requires_grad=True)
    with L.no_grad():
        y = (x * 2).sum()
    y.backward()


def _detach_backward(L):
    x = L.ones(2, requires_grad=True)
    (x * 2).detach().sum().backward()


def _grad_of_nonleaf_warn(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    y.sum().backward()
    return y.grad


def _zero_grad_set_to_none_ok(L):
    m = L.nn.Linear(2, 2)
    o = L.optim.SGD(m.parameters(), lr=0.1)
    o.zero_grad()
    o.step()
    return "ok"


def _checkpoint_no_grad_warn(L):
    from importlib import import_module
    cp = import_module(L.__name__ + ".utils.checkpoint")
    return cp.checkpoint(lambda x: x * 2, L.ones(2), use_reentrant=False)


def _clip_grad_nonfinite(L):
    w = L.ones(2, requires_grad=True)
    w.grad = L.tensor([float("inf"), 1.])
    return L.nn.utils.clip_grad_norm_([w], 1.0, error_if_nonfinite=True)


def _hook_returns_wrong_shape(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: L.ones(3))
    y.sum().backward()


def _hook_returns_wrong_type(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: 3)
    y.sum().backward()


def _autograd_grad_create_graph_backward_twice(L):
    x = L.ones(2, requires_grad=True)
    g, = L.autograd.grad((x ** 3).sum(), x, create_graph=True)
    g.sum().backward()
    g.sum().backward()


def _function_ctx_saved_twice(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2
    x = L.ones(2, requires_grad=True)
    y = F.apply(x).sum()
    y.backward()
    y.backward()


def _function_save_non_tensor(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(3)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return F.apply(L.ones(2, requires_grad=True))


def _function_mark_dirty_not_returned(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return F.apply(L.ones(2, requires_grad=True) * 1)


def _state_dict_then_optimizer_step_shape(L):
    w = L.ones(2, requires_grad=True)
    o = L.optim.Adam([w])
    w.grad = L.ones(3)
    o.step()


def _sgd_grad_dtype(L):
    w = L.ones(2, requires_grad=True)
    o = L.optim.SGD([w], lr=0.1)
    w.grad = None
    return o.step() or "ok"


def _train_bad_label_dtype(L):
    m = L.nn.Linear(3, 2)
    return L.nn.CrossEntropyLoss()(m(L.ones(4, 3)), L.tensor([0., 1., 0., 1.]))


def _param_grad_leak(L):
    p = L.nn.Parameter(L.ones(2))
    p.grad = L.ones(2, dtype=L.float64)


def _embedding_max_norm_leaf(L):
    e = L.nn.Embedding(3, 2, max_norm=1.0)
    return e(L.tensor([0, 5]))


def _module_missing_forward(L):
    class M(L.nn.Module):
        pass
    return M()(L.ones(2))


def _module_param_before_init(L):
    class M(L.nn.Module):
        def __init__(self):
            self.w = L.nn.Parameter(L.ones(2))
    return M()


def _module_register_bad_name(L):
    m = L.nn.Module()
    m.register_parameter("a.b", L.nn.Parameter(L.ones(1)))


def _module_register_non_param(L):
    m = L.nn.Module()
    m.register_parameter("a", L.ones(1))


def _module_assign_tensor_to_param(L):
    m = L.nn.Linear(2, 2)
    m.weight = L.ones(2, 2)


def _module_register_buffer_bad(L):
    m = L.nn.Module()
    m.register_buffer("a", [1])


def _module_add_module_bad(L):
    m = L.nn.Module()
    m.add_module("x", 3)


def _module_getattr_missing(L):
    return L.nn.Linear(2, 2).nonexistent


def _sequential_index(L):
    return L.nn.Sequential(L.nn.ReLU())[3]


def _modulelist_index(L):
    return L.nn.ModuleList([L.nn.ReLU()])[2]


def _moduledict_missing(L):
    return L.nn.ModuleDict({"a": L.nn.ReLU()})["b"]


def _modulelist_append_bad(L):
    return L.nn.ModuleList().append(3)


def _get_submodule_missing(L):
    return L.nn.Sequential(L.nn.ReLU()).get_submodule("5")


def _get_parameter_missing(L):
    return L.nn.Linear(2, 2).get_parameter("nope")


CASES = [
    ("module_missing_forward", _module_missing_forward),
    ("module_param_before_init", _module_param_before_init),
    ("module_register_bad_name", _module_register_bad_name),
    ("module_register_non_param", _module_register_non_param),
    ("module_assign_tensor_to_param", _module_assign_tensor_to_param),
    ("module_register_buffer_bad", _module_register_buffer_bad),
    ("module_add_module_bad", _module_add_module_bad),
    ("module_getattr_missing", _module_getattr_missing),
    ("sequential_index", _sequential_index),
    ("modulelist_index", _modulelist_index),
    ("moduledict_missing", _moduledict_missing),
    ("modulelist_append_bad", _modulelist_append_bad),
    ("get_submodule_missing", _get_submodule_missing),
    ("get_parameter_missing", _get_parameter_missing),
    ("cuda_tensor", lambda L: L.ones(2).cuda()),
    ("to_cuda", lambda L: L.ones(2).to("cuda")),
    ("device_bad", lambda L: L.ones(2, device="gpu")),
    ("device_bad_index", lambda L: L.ones(2, device="cpu:x")),
    ("save_lambda", _save_lambda),
    ("load_garbage", _load_garbage),
    ("no_grad_backward", _no_grad_backward),
    ("detach_backward", _detach_backward),
    ("nonleaf_grad_warn", _grad_of_nonleaf_warn),
    ("zero_grad_step_ok", _zero_grad_set_to_none_ok),
    ("clip_grad_nonfinite", _clip_grad_nonfinite),
    ("hook_wrong_shape", _hook_returns_wrong_shape),
    ("hook_wrong_type", _hook_returns_wrong_type),
    ("create_graph_backward_twice", _autograd_grad_create_graph_backward_twice),
    ("function_saved_twice", _function_ctx_saved_twice),
    ("function_save_non_tensor", _function_save_non_tensor),
    ("function_mark_dirty_not_returned", _function_mark_dirty_not_returned),
    ("adam_grad_shape", _state_dict_then_optimizer_step_shape),
    ("sgd_no_grad_ok", _sgd_grad_dtype),
    ("train_float_labels", _train_bad_label_dtype),
    ("param_grad_dtype", _param_grad_leak),
    ("embedding_max_norm_oob", _embedding_max_norm_leaf),
    ("softmax_no_dim", lambda L: L.nn.functional.softmax(L.ones(2, 3))),
    ("Softmax_module_no_dim_ok", lambda L: L.nn.Softmax()(L.ones(2, 3))),
    ("relu_inplace_leaf", lambda L: L.relu_(L.ones(2, requires_grad=True))),
    ("sigmoid_int_ok", lambda L: L.sigmoid(L.tensor([1]))),
    ("tanh_bool_ok", lambda L: L.tanh(L.tensor([True]))),
    ("abs_bool", lambda L: L.abs(L.tensor([True]))),
    ("sign_bool_ok", lambda L: L.sign(L.tensor([True]))),
    ("round_int_decimals", lambda L: L.round(L.tensor([1]), decimals=1)),
    ("argmax_bool", lambda L: L.tensor([True, False]).argmax()),
    ("sum_str_dim", lambda L: L.ones(2).sum("a")),
    ("mean_float_dim", lambda L: L.ones(2).mean(0.5)),
    ("view_float_size", lambda L: L.ones(4).view(2.0, 2)),
    ("reshape_str", lambda L: L.ones(4).reshape("4")),
    ("permute_float", lambda L: L.ones(2, 2).permute(0.0, 1)),
    ("clamp_no_bounds", lambda L: L.ones(2).clamp()),
    ("clamp_tensor_shape", lambda L: L.ones(2).clamp(min=L.ones(3))),
    ("topk_dim", lambda L: L.ones(3).topk(1, dim=1)),
    ("sort_dim", lambda L: L.ones(3).sort(dim=2)),
    ("cross_dim", lambda L: L.cross(L.ones(2, 2), L.ones(2, 2), dim=1)),
    ("inverse_singular", lambda L: L.linalg.inv(L.zeros(2, 2))),
    ("inverse_nonsquare", lambda L: L.linalg.inv(L.zeros(2, 3))),
    ("cholesky_not_pd", lambda L: L.linalg.cholesky(-L.eye(2))),
    ("solve_shape", lambda L: L.linalg.solve(L.eye(2), L.ones(3))),
    ("det_nonsquare", lambda L: L.det(L.ones(2, 3))),
    ("det_int", lambda L: L.det(L.ones(2, 2, dtype=L.long))),
    ("matrix_exp_1d", lambda L: L.matrix_exp(L.ones(2))),
    ("svd_1d", lambda L: L.linalg.svd(L.ones(2))),
    ("eigh_nonsquare", lambda L: L.linalg.eigh(L.ones(2, 3))),
    ("qr_int", lambda L: L.linalg.qr(L.ones(2, 2, dtype=L.long))),
    ("lstsq_shape", lambda L: L.linalg.lstsq(L.ones(3, 2), L.ones(4, 1))),
    ("pinv_1d", lambda L: L.linalg.pinv(L.ones(3))),
    ("cdist_shape", lambda L: L.cdist(L.ones(2, 3), L.ones(2, 4))),
    ("cosine_similarity_shape", lambda L:
        L.nn.functional.cosine_similarity(L.ones(2, 3), L.ones(2, 4))),
    ("normalize_dim", lambda L: L.nn.functional.normalize(L.ones(2, 3), dim=2)),
    ("unfold_size", lambda L: L.ones(3).unfold(0, 4, 1)),
    ("unfold_step0", lambda L: L.ones(3).unfold(0, 2, 0)),
    ("F_unfold_3d", lambda L: L.nn.functional.unfold(L.ones(1, 2, 2), 3)),
    ("pixel_shuffle_div", lambda L: L.nn.functional.pixel_shuffle(L.ones(1, 3, 2, 2), 2)),
    ("adaptive_pool_neg", lambda L: L.nn.functional.adaptive_avg_pool2d(L.ones(1, 1, 4, 4), -1)),
    ("grid_sample_shape", lambda L:
        L.nn.functional.grid_sample(L.ones(1, 1, 4, 4), L.ones(1, 2, 2, 3), align_corners=False)),
    ("LSTM_input_size", lambda L: L.nn.LSTM(4, 3)(L.ones(5, 2, 3))),
    ("LSTM_hidden_shape", lambda L:
        L.nn.LSTM(4, 3)(L.ones(5, 2, 4), (L.zeros(1, 2, 4), L.zeros(1, 2, 3)))),
    ("GRU_hidden_shape", lambda L: L.nn.GRU(4, 3)(L.ones(5, 2, 4), L.zeros(1, 3, 3))),
    ("RNN_2d_hidden_batched", lambda L: L.nn.RNN(4, 3)(L.ones(5, 2, 4), L.zeros(2, 3))),
    ("MHA_embed_div", lambda L: L.nn.MultiheadAttention(5, 2)),
    ("MHA_shape", lambda L:
        L.nn.MultiheadAttention(4, 2)(L.ones(3, 1, 5), L.ones(3, 1, 5), L.ones(3, 1, 5))),
    ("TransformerEncoderLayer_nhead", lambda L: L.nn.TransformerEncoderLayer(5, 2)),
    ("sdpa_shape", lambda L:
        L.nn.functional.scaled_dot_product_attention(L.ones(1, 2, 3), L.ones(1, 4, 5),
                                                     L.ones(1, 4, 5))),
    ("Flatten_dims", lambda L: L.nn.Flatten(3)(L.ones(2, 3))),
    ("Unflatten_sizes", lambda L: L.nn.Unflatten(1, (4, 2))(L.ones(2, 6))),
    ("MaxPool2d_small", lambda L: L.nn.MaxPool2d(3)(L.ones(1, 1, 2, 2))),
    ("AvgPool2d_1d", lambda L: L.nn.AvgPool2d(2)(L.ones(4))),
    ("Dropout2d_1d_warn", lambda L: L.nn.Dropout2d()(L.ones(4)).shape),
    ("GroupNorm_div", lambda L: L.nn.GroupNorm(3, 4)),
    ("GroupNorm_channels", lambda L: L.nn.GroupNorm(2, 4)(L.ones(2, 6, 3))),
    ("Identity_kwargs_ok", lambda L: L.nn.Identity(3, a=4)(L.ones(1)).shape),
    ("Sequential_bad_child", lambda L: L.nn.Sequential(L.nn.ReLU(), 3)),
    ("Sequential_call_two", lambda L: L.nn.Sequential(L.nn.ReLU())(L.ones(1), L.ones(1))),
    ("ModuleDict_bad_value", lambda L: L.nn.ModuleDict({"a": 3})),
    ("ParameterList_bad", lambda L: L.nn.ParameterList([3])[0]),
    ("init_fan_1d", lambda L: L.nn.init.xavier_uniform_(L.ones(3))),
    ("init_kaiming_0d", lambda L: L.nn.init.kaiming_uniform_(L.ones(()))),
    ("init_orthogonal_1d", lambda L: L.nn.init.orthogonal_(L.ones(3))),
    ("init_bad_nonlinearity", lambda L:
        L.nn.init.kaiming_normal_(L.ones(2, 2), nonlinearity="foo")),
    ("calculate_gain_bad", lambda L: L.nn.init.calculate_gain("foo")),
    ("parameters_to_vector_bad", lambda L: L.nn.utils.parameters_to_vector(L.ones(2))),
    ("pad_sequence_empty", lambda L: L.nn.utils.rnn.pad_sequence([])),
    ("pack_unsorted", lambda L: L.nn.utils.rnn.pack_padded_sequence(L.ones(3, 2, 1), [1, 3])),
    ("pack_zero_len", lambda L: L.nn.utils.rnn.pack_padded_sequence(L.ones(3, 2, 1), [3, 0])),
    ("default_collate_mixed", lambda L: L.utils.data.default_collate([L.ones(2), 3])),
    ("subset_oob", lambda L: L.utils.data.Subset(L.utils.data.TensorDataset(L.ones(3)), [5])[0]),
    ("tensor_dataset_oob", lambda L: L.utils.data.TensorDataset(L.ones(3))[3]),
    ("concat_dataset_empty", lambda L: L.utils.data.ConcatDataset([])),
    ("weighted_sampler_neg", lambda L: list(L.utils.data.WeightedRandomSampler([-1., 1.], 2))),
    ("no_grad_as_bad_decorator_ok", lambda L: L.no_grad()(lambda: 3)()),
    ("set_grad_enabled_str", lambda L: L.set_grad_enabled("x")),
    ("inference_mode_backward", lambda L: _inference_backward(L)),
]


def _inference_backward(L):
    x = L.ones(2, requires_grad=True)
    with L.inference_mode():
        y = (x * 2).sum()
    y.backward()


# cases where llgrad's first line is its own (torch's class, its own words)
_OWN_WORDS = {"cuda_tensor", "device_bad", "embedding_max_norm_oob", "load_garbage",
              "mean_float_dim", "permute_float", "pinv_1d", "reshape_str", "sum_str_dim",
              "to_cuda", "view_float_size", "weighted_sampler_neg"}


@pytest.mark.parametrize("name,fn", CASES, ids=[n for n, _ in CASES])
def test_raises_as_torch(name, fn):
    check(fn, torch, own_words=name in _OWN_WORDS)
