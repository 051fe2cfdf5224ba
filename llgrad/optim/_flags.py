"""The step-time errors of PyTorch's CPU optimisers for the flags capturable and
differentiable. Both are accepted by the constructor, as PyTorch's; the step refuses
them as PyTorch's does on CPU (capturable needs a CUDA-like device; a differentiable step
updates leaf parameters that require grad in place, under autograd). A differentiable
step whose parameters do not require grad is the plain step, so it runs."""
from ..runtime.creation import full_like, ones, zeros_like
from ..runtime.tensor import Tensor
from ._state import new_step

_DEVICES = ['cuda', 'xpu', 'hpu', 'privateuseone']
_STEPS = "params and state_steps"
# class: (names and xla listed, for the for-loop step; the same for foreach=True)
_CAPTURABLE = {
    "Adam": ((_STEPS, True), (_STEPS, False)),
    "Adadelta": ((_STEPS, False), (_STEPS, False)),
    "Adamax": ((_STEPS, True), (_STEPS, False)),
    "NAdam": (("params, mu_products and state_steps", True),
              ("params, mu_products, and state_steps", False)),
    "RAdam": ((_STEPS, True), (_STEPS, False)),
    "RMSprop": ((_STEPS, True), (_STEPS, True)),
    "Rprop": ((_STEPS, True), (_STEPS, True)),
    "ASGD": (("params, mus, etas, and state_steps", True),
             ("params, mus, etas, and state_steps", False)),
}


def _capturable_state(name, group, p):
    """The state PyTorch's _init_group makes for p before its capturable step refuses the
    CPU (a step 0, zero moments: what a later step, state_dict or load reads)."""
    state = {"step": new_step()}
    if name == "NAdam":
        state["mu_product"] = new_step(1.0)
    if name == "ASGD":
        lr = group["lr"]
        state["eta"] = lr.detach().clone().float() if hasattr(lr, "detach") else new_step(lr)
        state["mu"] = ones(())
    keys = {"Adam": ("exp_avg", "exp_avg_sq"), "NAdam": ("exp_avg", "exp_avg_sq"),
            "RAdam": ("exp_avg", "exp_avg_sq"), "Adamax": ("exp_avg", "exp_inf"),
            "Adadelta": ("square_avg", "acc_delta"), "ASGD": ("ax",), "Rprop": ("prev",),
            "RMSprop": ("square_avg",)}[name]
    if name == "Adam" and group.get("amsgrad"):
        keys += ("max_exp_avg_sq",)
    if name == "RMSprop":
        keys += (("momentum_buffer",) if group["momentum"] > 0 else ()) + \
            (("grad_avg",) if group["centered"] else ())
    for k in keys:
        state[k] = zeros_like(p)
    if name == "Rprop":
        lr0 = group["lr"]
        lr0 = lr0.squeeze() if isinstance(lr0, Tensor) else lr0     # (optimizer._to_scalar)
        state["step_size"] = full_like(p.grad, complex(lr0, lr0) if p.is_complex() else lr0)
    return state


def _torch_class(opt):
    for cls in type(opt).__mro__:
        if cls.__name__ in _CAPTURABLE or cls.__name__ in ("SGD", "Adagrad"):
            return cls.__name__
    return None


_FUSED_DEVICES = ['mps', 'cuda', 'xpu', 'hpu', 'cpu', 'mtia', 'privateuseone']


def fused_dtype_check(p):
    """PyTorch's refusal of a parameter its fused kernels do not take (a complex one)."""
    if not p.is_floating_point():
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors "
                           f"of supported devices: {_FUSED_DEVICES} but {p.dtype} and cpu")


def check_fused(opt, name, groups):
    """PyTorch's errors for a fused step over parameters its fused kernels do not take
    (complex ones), raised before anything is written: SGD and Adagrad check the first
    parameter with a gradient once per optimiser, then their kernels refuse a complex one
    (Adam(W) checks each parameter whose state it makes: adam.py)."""
    for group in groups:
        if not group.get("fused"):
            continue
        with_grad = [p for p in group["params"] if p.grad is not None]
        if with_grad and opt.__dict__.get("_need_device_dtype_check_for_fused", True):
            fused_dtype_check(with_grad[0])
            opt._need_device_dtype_check_for_fused = False
        complex_ = [p for p in with_grad if p.is_complex()]
        if complex_ and name == "SGD":
            if group["momentum"] != 0:      # (PyTorch's _init_group read their states)
                for p in with_grad:
                    opt.state[p]
            kind = "ComplexDouble" if "128" in str(complex_[0].dtype) else "ComplexFloat"
            raise NotImplementedError(f'"fused_sgd_kernel" not implemented for \'{kind}\'')
        if complex_:
            raise RuntimeError("`fused` does not support sparse grad or complex param")


def check_step_flags(opt, groups=None):
    """Raise PyTorch's error for a group (of groups, default all) whose capturable /
    differentiable / fused step cannot run."""
    groups = opt.param_groups if groups is None else groups
    name = _torch_class(opt)
    if name in ("SGD", "Adagrad"):
        check_fused(opt, name, groups)
    for group in groups:
        if not (group.get("capturable") or group.get("differentiable")):
            continue
        with_grad = [p for p in group["params"] if p.grad is not None]
        if not with_grad:
            continue
        if group.get("capturable") and name in _CAPTURABLE:
            for p in with_grad:     # (PyTorch's _init_group runs before its check)
                if len(opt.state[p]) == 0:
                    opt.state[p].update(_capturable_state(name, group, p))
            names, xla = _CAPTURABLE[name][1 if group.get("foreach") else 0]
            devices = _DEVICES + ["xla"] if xla else _DEVICES
            raise AssertionError(f"If capturable=True, {names} must be on supported devices: "
                                 f"{devices}.")
        if not group.get("differentiable"):
            continue
        if group.get("foreach") and name != "SGD":
            raise AssertionError("_foreach ops don't support autograd")
        if any(p.requires_grad and p.is_leaf for p in with_grad):
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        if any(p.requires_grad or p.grad.requires_grad for p in with_grad):
            raise NotImplementedError("llgrad.optim: differentiable=True (a step that autograd "
                                      "records) is not supported")


# PyTorch's optimisers that refuse a sparse gradient at step (SGD, Adagrad, SparseAdam and
# LBFGS take them), each with its message; AdamW's is Adam's
_NO_SPARSE = {"Adam": "Adam does not support sparse gradients, please consider SparseAdam "
                      "instead"}
_NO_SPARSE["AdamW"] = _NO_SPARSE["Adam"]
for _name in ("Adamax", "ASGD", "Adadelta", "NAdam", "RAdam", "RMSprop", "Rprop", "Adafactor",
              "Muon"):
    _NO_SPARSE[_name] = f"{_name} does not support sparse gradients"


def refuses_sparse(opt):
    """Whether opt is (derives from) one of llgrad's optimisers without a sparse rule."""
    for cls in type(opt).__mro__:
        if cls.__module__.startswith("llgrad.optim"):
            return _NO_SPARSE.get(cls.__name__)
    return None


def check_sparse_grads(opt, groups=None):
    """Raise PyTorch's error when an optimiser of llgrad's that has no sparse rule meets a
    sparse gradient (nn.Embedding(sparse=True)'s) in groups (default all)."""
    message = refuses_sparse(opt)
    if message is None:
        return
    for group in opt.param_groups if groups is None else groups:
        for p in group["params"]:
            g = p._grad
            if g is not None and g.__class__ is not p.__class__ and g.is_sparse:
                raise RuntimeError(message)
