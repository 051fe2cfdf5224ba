"""Six more training steps beside bench/untuned_models.py's, written as their reference code
and tutorials write them and run before llgrad was tuned on any of them (2026-12-05): DLRM
(facebookresearch/dlrm: EmbeddingBags summed over offsets, bottom and top MLPs, the
dot interaction by bmm and a gather of the lower triangle; BCELoss, SGD), PyTorch's spatial
transformer network tutorial (a localisation net regressing theta, F.affine_grid,
F.grid_sample, Dropout2d, nll_loss; SGD), PyTorch's DQN tutorial's optimize_model (a replay
batch drawn by randint, Q(s).gather(1, a), the target net's max over a boolean-masked set of
next states written into zeros, SmoothL1Loss, clip_grad_value_, AdamW(amsgrad=True), the
soft update of the target net through state_dict/load_state_dict), a tiny NeRF (stratified
ray samples, positional encoding, volume rendering by an exclusive cumprod), a BiLSTM-CRF
tagger (packed bidirectional LSTM, pytorch-crf's forward algorithm) and PyTorch's
nn.Transformer translation tutorial (masks of three kinds, ignore_index). The last three are
in untuned_models_seventh_b.py.

    python bench/untuned_models_seventh.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled
(LLGRAD_COMPILE=sync, warm), 1 thread each, seeded alike (llgrad draws PyTorch's numbers);
the losses of the first 4 steps and the gradients and parameters after them compared with
torch's (largest difference relative to the tensor's largest element; parameters without
the elements whose gradient is rounding noise, 1e-6 of the largest or less); then blocks of 3
steps interleaved, medians of 7."""
import os
import sys
import time
import warnings

import untuned_models_seventh_b
from untuned_models_fifth import training_step
from measure import block_medians

NAMES = ("dlrm", "stn", "dqn", "nerf", "crf", "translate")


def build(lib, name):
    return training_step(lib, getattr(untuned_models_seventh_b, "_" + name, None) or
                         globals()["_" + name])


def _dlrm(lib):
    # (facebookresearch/dlrm's dlrm_s_pytorch.py DLRM_Net: create_mlp's normal init, create_emb's
    # uniform(-sqrt(1/n), sqrt(1/n)) sparse EmbeddingBags, apply_emb, the "dot" interaction
    # without self-interaction, BCELoss; its random data generator's multi-hot bags. The
    # numpy initialisers are drawn with the library's generator instead, and the bags are
    # dense: llgrad has no sparse gradients and says so for EmbeddingBag(sparse=True).)
    nn = lib.nn

    class DLRM_Net(nn.Module):
        def create_mlp(self, ln, sigmoid_layer):
            layers = nn.ModuleList()
            for i in range(0, len(ln) - 1):
                n, m = ln[i], ln[i + 1]
                LL = nn.Linear(int(n), int(m), bias=True)
                LL.weight.data.normal_(0.0, (2 / (m + n)) ** 0.5)
                LL.bias.data.normal_(0.0, (1 / m) ** 0.5)
                layers.append(LL)
                layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
            return nn.Sequential(*layers)

        def create_emb(self, m, ln):
            emb_l = nn.ModuleList()
            for n in ln:
                EE = nn.EmbeddingBag(n, m, mode="sum", sparse=False)
                EE.weight.data.uniform_(-(1 / n) ** 0.5, (1 / n) ** 0.5)
                emb_l.append(EE)
            return emb_l

        def __init__(self, m_spa, ln_emb, ln_bot, ln_top, sigmoid_top):
            super(DLRM_Net, self).__init__()
            self.emb_l = self.create_emb(m_spa, ln_emb)
            self.bot_l = self.create_mlp(ln_bot, -1)
            self.top_l = self.create_mlp(ln_top, sigmoid_top)

        def apply_emb(self, lS_o, lS_i, emb_l):
            ly = []
            for k, sparse_index_group_batch in enumerate(lS_i):
                sparse_offset_group_batch = lS_o[k]
                E = emb_l[k]
                V = E(sparse_index_group_batch, sparse_offset_group_batch, per_sample_weights=None)
                ly.append(V)
            return ly

        def interact_features(self, x, ly):
            (batch_size, d) = x.shape
            T = lib.cat([x] + ly, dim=1).view((batch_size, -1, d))
            Z = lib.bmm(T, lib.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            li = lib.tensor([i for i in range(ni) for j in range(i)])
            lj = lib.tensor([j for i in range(nj) for j in range(i)])
            Zflat = Z[:, li, lj]
            return lib.cat([x] + [Zflat], dim=1)

        def forward(self, dense_x, lS_o, lS_i):
            x = self.bot_l(dense_x)
            ly = self.apply_emb(lS_o, lS_i, self.emb_l)
            z = self.interact_features(x, ly)
            return self.top_l(z)

    ln_emb, m_spa, batch = [1000, 800, 500, 2000, 100, 300, 1500, 50], 16, 128
    ln_bot = [13, 64, 16]
    n_int = len(ln_emb) + 1
    ln_top = [m_spa + n_int * (n_int - 1) // 2, 64, 32, 1]
    m = DLRM_Net(m_spa, ln_emb, ln_bot, ln_top, len(ln_top) - 2)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    loss_fn = nn.BCELoss(reduction="mean")
    dense_x = lib.rand(batch, 13)
    lS_o, lS_i = [], []
    for n in ln_emb:
        sizes = lib.randint(1, 4, (batch,))
        lS_o.append(lib.cat([lib.zeros(1, dtype=lib.int64), lib.cumsum(sizes, 0)[:-1]]))
        lS_i.append(lib.randint(0, n, (int(sizes.sum()),)))
    T = lib.randint(0, 2, (batch, 1)).float()
    return m, opt, lambda: loss_fn(m(dense_x, lS_o, lS_i), T)


def _stn(lib):
    # (PyTorch's spatial_transformer_tutorial: its Net and train(), on MNIST-sized batches of 64)
    nn, F = lib.nn, lib.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
            self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
            self.conv2_drop = nn.Dropout2d()
            self.fc1 = nn.Linear(320, 50)
            self.fc2 = nn.Linear(50, 10)
            self.localization = nn.Sequential(
                nn.Conv2d(1, 8, kernel_size=7), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
                nn.Conv2d(8, 10, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
            self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))
            self.fc_loc[2].weight.data.zero_()
            self.fc_loc[2].bias.data.copy_(lib.tensor([1, 0, 0, 0, 1, 0], dtype=lib.float))

        def stn(self, x):
            xs = self.localization(x)
            xs = xs.view(-1, 10 * 3 * 3)
            theta = self.fc_loc(xs)
            theta = theta.view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            x = F.grid_sample(x, grid, align_corners=False)
            return x

        def forward(self, x):
            x = self.stn(x)
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 320)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, training=self.training)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    m = Net()
    opt = lib.optim.SGD(m.parameters(), lr=0.01)
    data, target = lib.rand(64, 1, 28, 28), lib.randint(0, 10, (64,))
    return m, opt, lambda: F.nll_loss(m(data), target)


def _dqn(lib):
    # (PyTorch's reinforcement_q_learning tutorial: DQN, optimize_model and the soft update, on
    # CartPole-shaped transitions held in tensors, a batch drawn by randint each step)
    nn, F = lib.nn, lib.nn.functional
    BATCH_SIZE, GAMMA, TAU, LR = 128, 0.99, 0.005, 1e-4
    n_observations, n_actions, capacity = 4, 2, 2000

    class DQN(nn.Module):
        def __init__(self, n_observations, n_actions):
            super(DQN, self).__init__()
            self.layer1 = nn.Linear(n_observations, 128)
            self.layer2 = nn.Linear(128, 128)
            self.layer3 = nn.Linear(128, n_actions)

        def forward(self, x):
            x = F.relu(self.layer1(x))
            x = F.relu(self.layer2(x))
            return self.layer3(x)

    policy_net = DQN(n_observations, n_actions)
    target_net = DQN(n_observations, n_actions)
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = lib.optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
    criterion = nn.SmoothL1Loss()
    states = lib.randn(capacity, n_observations)
    actions = lib.randint(0, n_actions, (capacity, 1))
    rewards = lib.ones(capacity)
    next_states = states + 0.1 * lib.randn(capacity, n_observations)
    final = lib.rand(capacity) < 0.1           # (episodes that ended: next_state None)

    def loss():
        idx = lib.randint(0, capacity, (BATCH_SIZE,))
        state_batch, action_batch, reward_batch = states[idx], actions[idx], rewards[idx]
        non_final_mask = ~final[idx]
        non_final_next_states = next_states[idx][non_final_mask]
        state_action_values = policy_net(state_batch).gather(1, action_batch)
        next_state_values = lib.zeros(BATCH_SIZE)
        with lib.no_grad():
            next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
        expected_state_action_values = (next_state_values * GAMMA) + reward_batch
        return criterion(state_action_values, expected_state_action_values.unsqueeze(1))

    def soft_update():
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[key] * (1 - TAU)
        target_net.load_state_dict(target_net_state_dict)
    return policy_net, optimizer, loss, {"clip_value": 100, "after": soft_update}


def _grads(m):
    """name -> (parameter, grad) as float64 arrays (sparse grads made dense)."""
    import numpy as np
    out = {}
    for n, p in m.named_parameters():
        g = p.grad
        if g is not None and getattr(g, "is_sparse", False):
            g = g.to_dense()
        out[n] = (np.asarray(p.detach().numpy(), np.float64),
                  None if g is None else np.asarray(g.detach().numpy(), np.float64))
    return out


def _rel(a, b):
    import numpy as np
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)) if a.size else 0.0


def _rel_where(a, b, g, floor):
    """_rel over the elements whose gradient g is above floor (all where g is None)."""
    import numpy as np
    if g is None or not a.size:
        return _rel(a, b)
    keep = np.abs(g) > floor
    return float(np.abs(a - b)[keep].max(initial=0.0) / max(np.abs(b).max(), 1e-30))


def main(names, with_torch_compile, build=build, steps=4):
    """Each model of `names` (made by build(lib, name)) as torch, llgrad eager and llgrad
    compiled (and torch.compile): `steps` steps checked against torch, then timed; also the
    runner of the eighth set (untuned_models_eighth.py)."""
    import llgrad
    import torch
    from llgrad.compile.eager_builds import wait as wait_eager_builds
    torch.set_num_threads(1)
    llgrad.set_num_threads(1)
    rows = []
    for name in names:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fns, losses, state = {}, {}, {}
            variants = [("torch", torch, None), ("llgrad eager", llgrad, None),
                        ("llgrad compiled", llgrad, llgrad.compile)]
            if with_torch_compile:
                variants.insert(1, ("torch.compile", torch, torch.compile))
            for k, lib, wrap in variants:
                m, step = build(lib, name)      # (seeded: each run draws from the same state)
                fns[k] = step = wrap(step) if wrap else step
                t0 = time.perf_counter()
                losses[k] = [float(step()) for _ in range(steps)]
                state[k] = _grads(m)
                if k == "torch.compile":
                    print(f"    (torch.compile: first {steps} steps "
                          f"{time.perf_counter() - t0:.1f} s)")
            fns["llgrad compiled"].wait()
            wait_eager_builds()     # (an eager kernel still building would be timed too)
        notes = sorted({str(x.message)[:200] for x in w if "llgrad" in str(x.message)})
        diffs = {}
        for k in ("llgrad eager", "llgrad compiled"):
            ref, got = state["torch"], state[k]
            d_loss = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses[k], losses["torch"]))
            # (an element whose gradient is rounding noise, such as the key projection's
            # bias's under softmax, takes Adam steps of the noise's sign: left out)
            g_top = max(abs(g).max() for _, g in ref.values() if g is not None and g.size)
            d_par = max(_rel_where(got[n][0], ref[n][0], ref[n][1], 1e-6 * g_top) for n in ref)
            d_grad = max(_rel(got[n][1], ref[n][1]) for n in ref if ref[n][1] is not None)
            diffs[k] = (d_loss, d_grad, d_par, abs(losses[k][-1] - losses["torch"][-1]))
        med = block_medians(fns)
        t = med["torch"]
        print(f"{name:10s} " + "  ".join(f"{k} {v:7.2f} ms ({v / t:.2f}x)" for k, v in med.items()),
              flush=True)
        for k, (dl, dg, dp, dn) in diffs.items():
            print(f"    {k}: |loss - torch| at step {steps} {dn:.1e}; max rel diff over {steps} "
                  f"steps: loss {dl:.1e}, grads {dg:.1e}, params {dp:.1e}")
        for n in notes:
            print("    ", n)
        rows.append((name, med))
    return rows


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    main(chosen, "--torch-compile" in sys.argv)
