"""Sweep 17b (H), part 8: a compiled module (llgrad.compile(model)) around a pre-norm
nn.TransformerEncoder with a callable activation and dropout, trained on batches of varying
length with padding masks and masked mean pooling, evaluated under no_grad with eval();
torch's RNG state after the run compared too. Run with PyTorch, with llgrad eagerly and
compiled (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def cmod(torch, env):
    nn = torch.nn
    F = nn.functional
    V, D = 12, 16

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            self.pos = nn.Parameter(torch.zeros(1, 10, D))
            layer = nn.TransformerEncoderLayer(D, 4, 32, dropout=0.1, batch_first=True,
                                               norm_first=True, activation=F.gelu)
            self.enc = nn.TransformerEncoder(layer, 1, norm=nn.LayerNorm(D),
                                             enable_nested_tensor=False)
            self.head = nn.Linear(D, 2)

        def forward(self, ids):
            pad = ids == 0
            x = self.emb(ids) + self.pos[:, :ids.size(1)]
            h = self.enc(x, src_key_padding_mask=pad)
            keep = (~pad).unsqueeze(-1).float()
            pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1)
            return self.head(pooled)

    model = env.init(Enc())
    fmodel = env.step(model)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    batches = []
    for L in (6, 4, 8, 4):
        ids = env.randint(1, V, (3, L))
        ids[1, L - 2:] = 0
        ids[2, L - 1:] = 0
        y = env.randint(0, 2, (3,))
        batches.append((ids, y))
    torch.manual_seed(7)
    best = None
    for ep in range(2):
        model.train()
        for i, (ids, y) in enumerate(batches):
            opt.zero_grad()
            loss = F.cross_entropy(fmodel(ids), y)
            loss.backward()
            opt.step()
            env.rec(f"loss {ep} {i}", loss)
        model.eval()
        with torch.no_grad():
            correct = sum((fmodel(ids).argmax(-1) == y).sum().item() for ids, y in batches)
            vl = sum(F.cross_entropy(fmodel(ids), y, reduction="sum") for ids, y in batches) / 12
        env.rec(f"correct {ep}", correct)
        env.rec(f"val {ep}", vl)
        env.rec(f"training {ep}", model.training)
    env.rec("w", model.enc.layers[0].self_attn.in_proj_weight)
    env.rec("rng", torch.get_rng_state()[:40])


def test_compiled_module_varying_lengths():
    run_tutorial(cmod)
