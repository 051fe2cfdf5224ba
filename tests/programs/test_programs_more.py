"""More programs of common kinds (U-Net, autoencoders, ResNet blocks, a 2-D GAN, RealNVP, a
VAE on torch.distributions, a mixture density network, word2vec, an LSTM forecaster, a graph
network, padded/max-norm embeddings, label smoothing, a physics-informed net, MAML,
SimCLR, gradient clipping, weight/spectral norm), run with PyTorch, with llgrad eagerly and
with llgrad compiling their steps; see tutorial_harness.py."""
import pytest

pytest.importorskip("torch")

import programs_more_generative as generative  # noqa: E402
import programs_more_meta as meta  # noqa: E402
import programs_more_seq as seq  # noqa: E402
import programs_more_vision as vision  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    # vision: segmentation, autoencoders, residual networks
    "vision.unet": vision.unet,
    "vision.conv_autoencoder": vision.conv_autoencoder,
    "vision.denoising_autoencoder": vision.denoising_autoencoder,
    "vision.resnet_blocks": vision.resnet_blocks,
    # generative models and torch.distributions
    "generative.gan_2d": generative.gan_2d,
    "generative.realnvp": generative.realnvp,
    "generative.realnvp_mvn_prior": lambda torch, env: generative.realnvp(torch, env, True),
    "generative.vae_distributions": generative.vae_distributions,
    "generative.mixture_density": generative.mixture_density,
    # embeddings, sequences, graphs, losses
    "seq.word2vec": seq.word2vec,
    "seq.lstm_forecaster": seq.lstm_forecaster,
    "seq.gnn": seq.gnn,
    "seq.embedding_padding_max_norm": seq.embedding_padding_max_norm,
    "seq.label_smoothing_ce": seq.label_smoothing_ce,
    # gradients of gradients, contrastive learning, clipping, parametrizations
    "meta.pinn": meta.pinn,
    "meta.maml": meta.maml,
    "meta.simclr": meta.simclr,
    "meta.grad_clipping": meta.grad_clipping,
    "meta.weight_and_spectral_norm": meta.weight_and_spectral_norm,
}


# (over ~1 s each, their builds of larger graphs: in the slow run, for the suite's time)
SLOW = {"vision.unet", "seq.lstm_forecaster", "vision.denoising_autoencoder", "generative.realnvp",
        # (~0.6-1 s each: residual blocks (test_tutorials_vision_more.py's transfer
        # programs build ResNets), a VAE (test_tutorials.py's vae_random), SimCLR)
        "vision.resnet_blocks", "generative.vae_distributions", "meta.simclr"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOLERANCES.get(name, {}))


# Adam's m / sqrt(v) turns float32 summation-order noise in a gradient that is almost 0 into
# ~3e-6 of a weight (spectral norm's sigma gradient sums a transposed grad, as torch's does,
# in another order than torch's kernel)
# (vision.unet likewise: one weight of 1,152 ~2.7e-6 off after the Adam steps on an AVX-512
# host, whose PyTorch convolutions sum in another order)
TOLERANCES = {"meta.weight_and_spectral_norm": {"atol": 2e-6}, "vision.unet": {"atol": 2e-6}}
