"""The import statements PyTorch programs begin with work with `torch` read as `llgrad`: each
statement below runs against llgrad (and, where PyTorch is installed, against torch too, so
the list stays true to PyTorch), and the names it binds are usable."""
import importlib

import pytest

import llgrad

STATEMENTS = """\
from torch import Tensor, nn, optim
import torch.nn.functional as F
from torch.nn import init
from torch.nn.init import xavier_uniform_, kaiming_normal_, trunc_normal_, orthogonal_
from torch.nn.parameter import Parameter, Buffer, UninitializedParameter, UninitializedBuffer
from torch.nn.modules.loss import _Loss, _WeightedLoss, CrossEntropyLoss
from torch.nn.modules.module import Module
from torch.nn.modules.batchnorm import _BatchNorm, BatchNorm2d
from torch.nn.modules.conv import Conv2d, _ConvNd
from torch.nn.modules.linear import Linear, Identity
from torch.nn.modules.container import Sequential, ModuleList, ModuleDict
from torch.nn.modules.activation import MultiheadAttention, GELU
from torch.nn.modules.transformer import TransformerEncoderLayer
from torch.nn.modules.utils import _pair, _single, _triple, consume_prefix_in_state_dict_if_present
from torch.nn.modules import Linear
from torch.nn.attention import sdpa_kernel, SDPBackend
from torch.nn.utils import clip_grad_norm_, clip_grad_value_, parameters_to_vector
from torch.nn.utils.rnn import pad_sequence, pack_padded_sequence, pad_packed_sequence
from torch.nn.utils.parametrize import register_parametrization
from torch.nn.utils.stateless import functional_call
from torch.autograd import Variable, Function, grad
from torch.autograd.functional import jacobian, hessian, vjp, jvp, hvp, vhp
from torch.autograd.graph import saved_tensors_hooks, save_on_cpu, Node
from torch.autograd.function import once_differentiable, FunctionCtx
import torch.autograd.functional
import torch.autograd.graph
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split
from torch.utils.checkpoint import checkpoint, checkpoint_sequential
import torch.utils.checkpoint
from torch.optim.lr_scheduler import StepLR, ReduceLROnPlateau, OneCycleLR, LambdaLR
from torch.optim import SGD, Adam, AdamW, RMSprop, Adagrad, LBFGS, Optimizer
from torch.func import functional_call, vmap, grad, jacrev, jacfwd, hessian
from torch.testing import assert_close, make_tensor
import torch.testing
from torch.types import Number
from torch.random import fork_rng, manual_seed
import torch.random
from torch.amp import autocast, GradScaler
from torch.cuda.amp import autocast, GradScaler
from torch import autocast
import torch.cuda.amp
"""


def _run(lib, statement):
    exec(statement.replace("torch", lib), {})


@pytest.mark.parametrize("statement", STATEMENTS.splitlines())
def test_statement_imports_with_llgrad(statement):
    _run("llgrad", statement)


@pytest.mark.parametrize("statement", STATEMENTS.splitlines())
def test_statement_imports_with_torch(statement):
    pytest.importorskip("torch")
    _run("torch", statement)


def test_submodules_are_attributes_of_their_parents():
    for dotted in ("autograd.functional", "autograd.graph", "autograd.function", "testing",
                   "types", "random", "nn.modules", "nn.modules.loss", "nn.attention",
                   "nn.parameter", "amp", "cuda.amp"):
        obj = llgrad
        for part in dotted.split("."):
            obj = getattr(obj, part)
        assert obj is importlib.import_module("llgrad." + dotted)


def test_parameter_module_holds_the_lazy_and_buffer_classes():
    from llgrad.nn.parameter import Buffer, UninitializedParameter, is_lazy
    assert llgrad.nn.Buffer is Buffer
    w = llgrad.nn.LazyLinear(3).weight
    assert isinstance(w, UninitializedParameter) and is_lazy(w)
    assert str(w) == repr(w) == "<UninitializedParameter>"
