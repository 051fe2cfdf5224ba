"""The step-time errors of PyTorch's CPU optimisers for the flags capturable and
differentiable. Both are accepted by the constructor, as PyTorch's; the step refuses
them as PyTorch's does on CPU (capturable needs a CUDA-like device; a differentiable step
updates leaf parameters that require grad in place, under autograd). A differentiable
step whose parameters do not require grad is the plain step, so it runs."""

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


def _torch_class(opt):
    for cls in type(opt).__mro__:
        if cls.__name__ in _CAPTURABLE or cls.__name__ in ("SGD", "Adagrad"):
            return cls.__name__
    return None


def check_step_flags(opt):
    """Raise PyTorch's error for a group whose capturable / differentiable step cannot run."""
    for group in opt.param_groups:
        if not (group.get("capturable") or group.get("differentiable")):
            continue
        with_grad = [p for p in group["params"] if p.grad is not None]
        if not with_grad:
            continue
        name = _torch_class(opt)
        if group.get("capturable") and name in _CAPTURABLE:
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


def check_sparse_grads(opt):
    """Raise PyTorch's error when an optimiser of llgrad's that has no sparse rule meets a
    sparse gradient (nn.Embedding(sparse=True)'s)."""
    message = refuses_sparse(opt)
    if message is None:
        return
    for group in opt.param_groups:
        for p in group["params"]:
            g = p._grad
            if g is not None and g.__class__ is not p.__class__ and g.is_sparse:
                raise RuntimeError(message)
