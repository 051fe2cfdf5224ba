"""Optimizer: PyTorch's base class. `param_groups` is a list of dicts (hyper-parameters
filled in from `defaults`); `state` maps each parameter to a dict of its state (tensors);
`state_dict()` replaces parameters by integer indices, in group order."""
from __future__ import annotations
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain
from typing import TYPE_CHECKING, TypeAlias

from ..runtime import trace_state
from ..runtime.hypers import ParamGroup, hyper, raw
from ..runtime.creation import full
from ..runtime.functions_settings import typename
from ..runtime.tensor import Tensor
from ._hooks import (OptimizerHooks, hooked_step, register_optimizer_step_post_hook,  # noqa: F401
                     register_optimizer_step_pre_hook, run_hooks)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

# the annotations of the optimisers' `params` and `lr` (as torch.optim's ParamsT)
ParamsT: TypeAlias = "Iterable[Tensor] | Iterable[dict[str, object]]"
LrT: TypeAlias = "float | Tensor"


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _get_value(t):
    """A state tensor's value as a Python number, as PyTorch's for-loop reads `step`. While
    tracing it stays a tensor (float64, 0-d), so that a compiled step does not specialise on
    its value and the scalar arithmetic on it rounds as the Python floats do."""
    return t.double() if trace_state.state.tracer is not None else t.item()


def _div(a, b, group=None, zero_possible=False):
    """a / b for a number a: `number / tensor` is reciprocal() * number in PyTorch (and
    here), which rounds differently from the float division of the untraced step. (A
    tensor a, such as a learning rate held in a tensor, divides as it is: made into a
    `full` it would be read out with item(), a value guard when traced.) a is group's lr
    when group is given: a Python float there makes the untraced step's division a
    Python one, which raises on zero (_nonzero_divisor; zero_possible: whether b can be 0
    in a later call of the trace, as the caller finds from the group's numbers)."""
    if isinstance(b, Tensor) and group is not None and not isinstance(raw(group, "lr"), Tensor):
        _nonzero_divisor(b, zero_possible)
    if not isinstance(b, Tensor) or isinstance(a, Tensor):
        return a / b
    return full((), a, dtype=b.dtype).div(b)


def _nonzero_divisor(b, zero_possible):
    """Eager's ZeroDivisionError for b, a traced stand-in for the Python float the untraced
    step divides by (_get_value: Adam's 1 - beta1 ** step with beta1 set to 1, Adagrad's
    1 + (step - 1) * lr_decay): the traced run raises it (tensor division would give the
    parameters inf or nan instead), and where b can be 0 in a later call, a guard makes
    that call trace again. (Only then: any value guard costs a training step ~15%.)"""
    tracer = trace_state.state.tracer
    if tracer is None:
        return
    if b._data.reshape(()).item() == 0:
        raise ZeroDivisionError("float division by zero")
    if zero_possible:
        tracer.guard(b != 0, True)


def _addcdiv_(param, tensor1, tensor2, value):
    """param.addcdiv_(tensor1, tensor2, value=value) composed of in-place tensor ops, in
    PyTorch's order (param + (value * tensor1) / tensor2): while tracing `value` is a
    tensor (derived from the step count or a tensor learning rate), not a number. A number
    goes to addcdiv_, whose kernel is that formula in one op (three ops' dispatch cost
    per parameter in an eager step)."""
    if not isinstance(value, Tensor):
        return param.addcdiv_(tensor1, tensor2, value=value)
    return param.add_(tensor1.mul(_as_number(value, param)).div_(tensor2))


def _to_scalar(x):
    """PyTorch's _to_scalar: a 1-element learning-rate tensor as a 0-d one, numbers as they are."""
    if isinstance(x, Tensor) and x.dim() != 0:
        return x.squeeze()
    return x


def _lr(group):
    """group's learning rate for the update: _to_scalar of hyper(group, "lr") (while a trace
    records, the graph input that stands for a float lr, so a schedule does not re-trace)."""
    return _to_scalar(hyper(group, "lr"))


def _as_number(x, like):
    """x as an operand next to the tensor `like` in an update: a 0-d float tensor standing
    for a number (a traced hyper-parameter, float64) cast to like's float dtype first, as
    PyTorch reads a Python number next to a float32 tensor. (Next to a 0-d parameter a
    float64 0-d tensor would make the op float64, rounding otherwise than the eager step;
    next to a dimensioned one promotion casts it the same way.)"""
    if isinstance(x, Tensor) and x.dim() == 0 and x.dtype is not like.dtype \
            and x.dtype.is_floating_point and like.dtype.is_floating_point:
        return x.to(like.dtype)
    return x


def _moments_(exp_avg, exp_avg_sq, grad, beta1, beta2):
    """Adam's moment updates in place (NAdam's, RAdam's): exp_avg lerps to grad by
    1 - beta1, exp_avg_sq to grad^2 by 1 - beta2; a traced beta (a 0-d tensor) cast to the
    state's dtype first, as eager's number is, and addcmul's order kept (value * t1 first)."""
    exp_avg.lerp_(grad, _as_number(1 - beta1, exp_avg))
    if isinstance(beta2, Tensor):
        exp_avg_sq.mul_(_as_number(beta2, exp_avg_sq)).addcmul_(
            grad.mul(_as_number(1 - beta2, grad)), grad)
    else:
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)


def _made_once():
    """once(what, like, make) -> _as_number(make(), like), made once per group and dtype:
    a traced hyper-parameter's arithmetic (0-d tensor ops: 1 - beta1, the cast of lr to a
    parameter's dtype) is the same for every parameter of a group, and a trace records
    each op it makes (a fifth of an Adam step's ops were these)."""
    made = {}

    def once(what, like, make):
        key = (what, like.dtype)
        if key not in made:
            made[key] = _as_number(make(), like)
        return made[key]
    return once


def _add_scaled_(param, t, scale):
    """param.add_(t, alpha=scale); a tensor scale (a traced lr) as alpha too: one fused
    multiply-add, as the eager step with a number (t * scale, then +, rounds twice)."""
    return param.add_(t, alpha=_as_number(scale, param))


def _check_lr(lr, nan_ok=False):
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    # (PyTorch's SGD tests `lr < 0.0`, which a NaN passes; the others `not 0.0 <= lr`)
    if lr < 0.0 if nan_ok else not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _tracing():
    return trace_state.state.tracer is not None


def _for_loop_only(fused=False, foreach=None):
    """The implementation flags as PyTorch's CPU optimisers take them: fused=True runs the
    single-tensor loop (PyTorch's fused CPU kernel does its arithmetic in one pass, equal to
    within an ulp; a compiled step fuses the loop itself). capturable and differentiable
    are refused at the step, as PyTorch's (_flags.check_step_flags)."""
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


class Optimizer(OptimizerHooks):
    """Base class of the optimisers, as torch.optim.Optimizer: param_groups (dicts of
    hyper-parameters and 'params'), state (per parameter), state_dict() / load_state_dict()
    in PyTorch's layout, so optimiser state interchanges with PyTorch's. A step compiles
    inside an llgrad.compile'd training step, state updated in place; a tensor lr is read at
    each call (a schedule does not re-trace). Only the single-tensor (for-loop)
    implementation exists: foreach and fused run it (_for_loop_only); capturable and
    differentiable steps raise PyTorch's CPU errors (_flags).

    dynamic_hypers: the hyper-parameters a schedule may change between compiled steps (a
    subclass's step reads them with runtime.hypers.hyper): graph inputs, not guards, so a
    schedule does not re-trace the step (the groups are ParamGroup dicts for that)."""
    dynamic_hypers: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not cls.dynamic_hypers and \
                not cls.__module__.startswith("llgrad."):
            # a user's optimiser (a Lion, a SAM) under a schedule: its step reads the lr as a
            # ParamGroup's stand-in (runtime/hypers.py), so a new lr is not a new trace
            cls.dynamic_hypers = ("lr",)
        if step is not None and not getattr(step, "_hooked", False):
            cls.step = hooked_step(step)        # (the step hooks, as PyTorch's wrapper)

    def __init__(self, params: ParamsT, defaults: dict[str, object]) -> None:
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.param_groups = [self._group(g) for g in self.param_groups]

    def _group(self, group):
        """group as a ParamGroup that knows this optimiser's dynamic hyper-parameters."""
        if not self.dynamic_hypers:
            return group
        if type(group) is ParamGroup:
            # (another optimiser's group, as SAM's base optimiser steps SAM's: the keys
            # either one's schedule may change stay inputs, OneCycleLR's momentum too)
            if not group.dynamic.issuperset(self.dynamic_hypers):
                group.dynamic = group.dynamic | frozenset(self.dynamic_hypers)
            return group
        return ParamGroup(dict.items(group), dynamic=self.dynamic_hypers)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            s += "".join(f"    {k}: {group[k]}\n" for k in sorted(group) if k != "params")
        return s + ")"

    # ---- parameter groups ----------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, object]) -> None:
        """Add a group of parameters (hyper-parameters not given take the defaults), as
        torch.optim.Optimizer.add_param_group."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = [params] if isinstance(params, Tensor) else list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some "
                                 "param names are missing")
            param_group["param_names"] = names
        param_group["params"] = params
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                "is " + type(p).__name__)
            if not (self.defaults.get("differentiable") or p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                raise ValueError("all optimizer param groups should be with/without names. "
                                 "cannot add param group "
                                 f"{'with' if names else 'without'} names to the optimizer")
        if not seen.isdisjoint(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(self._group(param_group))

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter (to None by default, else to zeros),
        as torch.optim.Optimizer.zero_grad."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:     # (not read first: nn.Module.zero_grad's)
                    p.grad = None
                elif p.grad is None:
                    continue
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def step(self, closure: Callable[[], float | Tensor] | None = None) -> float | Tensor | None:
        """Update the parameters from their .grad (closure: re-evaluate the loss first
        and return it), as torch.optim.Optimizer.step."""
        raise NotImplementedError

    # ---- state dict ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        """{'state': {index: {name: tensor}}, 'param_groups': [{..., 'params': [index]}]}.
        As in PyTorch, the state tensors are the optimizer's own (not copies)."""
        run_hooks(self, "_optimizer_state_dict_pre_hooks")
        index = {}
        groups = []
        start = 0
        for group in self.param_groups:
            # (PyTorch's numbering: a group's k-th parameter is start + k, a parameter
            # listed twice in one group takes its last position; the next group starts
            # after all of them)
            index.update({id(p): i for i, p in enumerate(group["params"], start)
                          if id(p) not in index})
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {index[id(k)] if isinstance(k, Tensor) else k: v for k, v in self.state.items()}
        return run_hooks(self, "_optimizer_state_dict_post_hooks",
                         {"state": state, "param_groups": groups})

    def load_state_dict(self, state_dict: dict[str, object]) -> None:
        """Load state from state_dict() (of llgrad's or PyTorch's optimiser), casting
        state tensors to their parameters' dtype, as
        torch.optim.Optimizer.load_state_dict."""
        state_dict = run_hooks(self, "_optimizer_load_state_dict_pre_hooks", state_dict.copy())
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            # PyTorch: state tensors take the parameter's dtype ('step' is kept as it is);
            # tensors that already match are used as they are, not copied
            if isinstance(value, Tensor):
                if key != "step" and param.is_floating_point():
                    return value.to(dtype=param.dtype)
                return value
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v
        for group, new in zip(groups, saved_groups):
            new["params"] = group["params"]
            if "param_names" in group and "param_names" not in new:
                new["param_names"] = group["param_names"]
        self.__setstate__({"state": state, "param_groups": saved_groups})
        run_hooks(self, "_optimizer_load_state_dict_post_hooks")
