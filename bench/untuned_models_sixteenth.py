"""Five more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-06): BYOL (lucidrains/byol-pytorch's learner: an online
encoder + projector + predictor, a deep-copied target network updated by an EMA
`t.mul_(m).add_(o, alpha=1 - m)` under no_grad inside the step, two views augmented by random
flips and colour jitter drawn in the step, the symmetric normalised-cosine loss with the
target's projections detached; Adam), knowledge distillation (pytorch.org's
knowledge_distillation_tutorial: a teacher DeepNN in eval mode under no_grad, a LightNN
student, softmax / log_softmax at temperature T, the KL sum scaled by T**2 beside the label's
cross entropy; Adam), MAML on sinusoid regression (cbfinn's maml task as PyTorch tutorials
write it: a functional MLP of F.linear on a parameter list, an inner SGD step by
autograd.grad(create_graph=True) per task, tasks' amplitudes and phases drawn in the step, the
query losses' second-order meta-gradient; Adam), and in untuned_models_sixteenth_b.py a SAC
update (pranz24/pytorch-soft-actor-critic: twin Q critics, a tanh-squashed Gaussian policy by
Normal.rsample, a learned log_alpha, three optimisers in one update, the Polyak update of the
target critic by copy_) and a CycleGAN step (junyanz/pytorch-CycleGAN-and-pix2pix: ResNet
generators with ReflectionPad2d, InstanceNorm2d and ConvTranspose2d, PatchGAN discriminators,
LSGAN targets by expand_as of a buffer, cycle and identity L1 losses, set_requires_grad on the
discriminators, Adam over itertools.chain of both generators).

    python bench/untuned_models_sixteenth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled,
1 thread each (no jax versions in this set); the checks, the timing and its printout are
untuned_models_eleventh.py's (main there). build(lib, name, small=True) makes the tests'
smaller versions."""
import copy
import os
import sys
import types

import untuned_models_sixteenth_b
from untuned_models_fifth import training_step

NAMES = ("byol", "kd", "maml", "sac", "cyclegan")
OWN_STEP = ("sac", "cyclegan")     # (makers that return (model, step): several optimisers)


def _maker(name):
    return getattr(untuned_models_sixteenth_b, "_" + name, None) or globals()["_" + name]


def build(lib, name, small=False):
    if name in OWN_STEP:
        lib.manual_seed(0)
        model, step = _maker(name)(lib, small)
        model.train()
        return model, step
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def _byol(lib, small):
    # (lucidrains/byol-pytorch's BYOL with its NetWrapper, MLP and EMA written out, on a small
    # CIFAR ResNet-ish backbone; the augmentations are tensor ops drawn in the step)
    nn, F = lib.nn, lib.nn.functional
    batch, size, width, proj, hidden = (4, 8, 8, 16, 32) if small else (64, 32, 32, 128, 512)

    def MLP(dim, projection_size, hidden_size=4096):
        return nn.Sequential(nn.Linear(dim, hidden_size), nn.BatchNorm1d(hidden_size),
                             nn.ReLU(inplace=True), nn.Linear(hidden_size, projection_size))

    def conv_bn(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True))

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(conv_bn(3, width, 1), conv_bn(width, width, 1),
                                          conv_bn(width, 2 * width, 2), conv_bn(2 * width, 2 * width, 1),
                                          conv_bn(2 * width, 4 * width, 2))
            self.pool = nn.AdaptiveAvgPool2d(1)

        def forward(self, x):
            return lib.flatten(self.pool(self.features(x)), 1)

    class NetWrapper(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net
            self.projector = MLP(4 * width, proj, hidden)

        def forward(self, x):
            representation = self.net(x)
            projection = self.projector(representation)
            return projection, representation

    def loss_fn(x, y):
        x = F.normalize(x, dim=-1, p=2)
        y = F.normalize(y, dim=-1, p=2)
        return 2 - 2 * (x * y).sum(dim=-1)

    def augment(x):
        # (RandomHorizontalFlip and a brightness / contrast jitter, per image)
        n = x.shape[0]
        flip = lib.rand(n, 1, 1, 1) < 0.5
        x = lib.where(flip, x.flip(3), x)
        bright = 1 + 0.4 * (lib.rand(n, 1, 1, 1) - 0.5)
        contrast = 1 + 0.4 * (lib.rand(n, 1, 1, 1) - 0.5)
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        return ((x * bright - mean) * contrast + mean).clamp(0, 1)

    class BYOL(nn.Module):
        def __init__(self, net, moving_average_decay=0.99):
            super().__init__()
            self.online_encoder = NetWrapper(net)
            self.target_encoder = copy.deepcopy(self.online_encoder)
            for p in self.target_encoder.parameters():
                p.requires_grad = False
            self.beta = moving_average_decay
            self.online_predictor = MLP(proj, proj, hidden)

        @lib.no_grad()
        def update_moving_average(self):
            for current, ma in zip(self.online_encoder.parameters(), self.target_encoder.parameters()):
                ma.mul_(self.beta).add_(current, alpha=1 - self.beta)

        def forward(self, x):
            image_one, image_two = augment(x), augment(x)
            images = lib.cat((image_one, image_two), dim=0)
            online_projections, _ = self.online_encoder(images)
            online_predictions = self.online_predictor(online_projections)
            online_pred_one, online_pred_two = online_predictions.chunk(2, dim=0)
            with lib.no_grad():
                target_projections, _ = self.target_encoder(images)
                target_projections = target_projections.detach()
                target_proj_one, target_proj_two = target_projections.chunk(2, dim=0)
            loss_one = loss_fn(online_pred_one, target_proj_two.detach())
            loss_two = loss_fn(online_pred_two, target_proj_one.detach())
            loss = loss_one + loss_two
            return loss.mean()

    learner = BYOL(Backbone())
    opt = lib.optim.Adam([p for p in learner.parameters() if p.requires_grad], lr=3e-4)
    images = lib.rand(batch, 3, size, size)
    return learner, opt, lambda: learner(images), {"after": learner.update_moving_average}


def _kd(lib, small):
    # (pytorch.org's knowledge_distillation_tutorial: DeepNN, LightNN and
    # train_knowledge_distillation's step, T=2, weights 0.25 / 0.75, CIFAR-10 sized batches)
    nn = lib.nn
    batch, size, k = (4, 8, 8) if small else (128, 32, 1)

    class DeepNN(nn.Module):
        def __init__(self, num_classes=10):
            super(DeepNN, self).__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 128 // k, kernel_size=3, padding=1), nn.ReLU(),
                nn.Conv2d(128 // k, 64 // k, kernel_size=3, padding=1), nn.ReLU(),
                nn.MaxPool2d(kernel_size=2, stride=2),
                nn.Conv2d(64 // k, 64 // k, kernel_size=3, padding=1), nn.ReLU(),
                nn.Conv2d(64 // k, 32 // k, kernel_size=3, padding=1), nn.ReLU(),
                nn.MaxPool2d(kernel_size=2, stride=2))
            self.classifier = nn.Sequential(nn.Linear(32 // k * (size // 4) ** 2, 512 // k), nn.ReLU(),
                                            nn.Dropout(0.1), nn.Linear(512 // k, num_classes))

        def forward(self, x):
            x = self.features(x)
            x = lib.flatten(x, 1)
            x = self.classifier(x)
            return x

    class LightNN(nn.Module):
        def __init__(self, num_classes=10):
            super(LightNN, self).__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 16, kernel_size=3, padding=1), nn.ReLU(),
                nn.MaxPool2d(kernel_size=2, stride=2),
                nn.Conv2d(16, 16, kernel_size=3, padding=1), nn.ReLU(),
                nn.MaxPool2d(kernel_size=2, stride=2))
            self.classifier = nn.Sequential(nn.Linear(16 * (size // 4) ** 2, 256), nn.ReLU(),
                                            nn.Dropout(0.1), nn.Linear(256, num_classes))

        def forward(self, x):
            x = self.features(x)
            x = lib.flatten(x, 1)
            x = self.classifier(x)
            return x

    teacher, student = DeepNN(), LightNN()
    teacher.eval()          # (trained beforehand; the tutorial's teacher.eval())
    T, soft_target_loss_weight, ce_loss_weight = 2, 0.25, 0.75
    ce_loss = nn.CrossEntropyLoss()
    optimizer = lib.optim.Adam(student.parameters(), lr=0.001)
    inputs = lib.randn(batch, 3, size, size)
    labels = lib.randint(0, 10, (batch,))

    def loss():
        with lib.no_grad():
            teacher_logits = teacher(inputs)
        student_logits = student(inputs)
        soft_targets = nn.functional.softmax(teacher_logits / T, dim=-1)
        soft_prob = nn.functional.log_softmax(student_logits / T, dim=-1)
        soft_targets_loss = lib.sum(soft_targets * (soft_targets.log() - soft_prob)) / soft_prob.size()[0] * (T**2)
        label_loss = ce_loss(student_logits, labels)
        return soft_target_loss_weight * soft_targets_loss + ce_loss_weight * label_loss
    return student, optimizer, loss


def _maml(lib, small):
    # (MAML on cbfinn's sinusoid tasks: amplitude in [0.1, 5], phase in [0, pi], x in [-5, 5];
    # a 1-40-40-1 ReLU MLP as a parameter list, one inner SGD step, meta-batch of tasks)
    import math
    nn, F = lib.nn, lib.nn.functional
    tasks, k_shot, hidden, inner_steps = (2, 5, 8, 1) if small else (25, 10, 40, 1)
    inner_lr = 0.01

    class Learner(nn.Module):
        def __init__(self):
            super().__init__()
            self.vars = nn.ParameterList()
            for fan_in, fan_out in ((1, hidden), (hidden, hidden), (hidden, 1)):
                w = nn.Parameter(lib.ones(fan_out, fan_in))
                lib.nn.init.kaiming_normal_(w)
                self.vars.append(w)
                self.vars.append(nn.Parameter(lib.zeros(fan_out)))

        def forward(self, x, vars=None):
            if vars is None:
                vars = self.vars
            x = F.relu(F.linear(x, vars[0], vars[1]))
            x = F.relu(F.linear(x, vars[2], vars[3]))
            return F.linear(x, vars[4], vars[5])

    net = Learner()
    meta_optim = lib.optim.Adam(net.parameters(), lr=1e-3)

    def sample_tasks():
        amp = lib.rand(tasks, 1, 1) * 4.9 + 0.1
        phase = lib.rand(tasks, 1, 1) * math.pi
        x = lib.rand(tasks, 2 * k_shot, 1) * 10 - 5
        y = amp * lib.sin(x - phase)
        return x[:, :k_shot], y[:, :k_shot], x[:, k_shot:], y[:, k_shot:]

    def loss():
        x_spt, y_spt, x_qry, y_qry = sample_tasks()
        losses_q = 0
        for i in range(tasks):
            fast_weights = list(net.parameters())
            for _ in range(inner_steps):
                loss = F.mse_loss(net(x_spt[i], fast_weights), y_spt[i])
                grad = lib.autograd.grad(loss, fast_weights, create_graph=True)
                fast_weights = [w - inner_lr * g for w, g in zip(fast_weights, grad)]
            losses_q = losses_q + F.mse_loss(net(x_qry[i], fast_weights), y_qry[i])
        return losses_q / tasks
    return net, meta_optim, loss


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=None, jax_models=types.SimpleNamespace(NAMES=()))
