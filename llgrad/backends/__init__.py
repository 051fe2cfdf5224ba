"""llgrad.backends: torch.backends' flags as PyTorch's CPU-only build has them. The flags
are settable (scripts set cudnn.benchmark or cuda.matmul.allow_tf32 at their top) and change
nothing: llgrad has no cuDNN, CUDA or MPS, and its kernels are its own (float32 matmuls are
never computed in TF32)."""
from . import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp, opt_einsum, quantized  # noqa: F401
