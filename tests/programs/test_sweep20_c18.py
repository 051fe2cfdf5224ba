"""Sweep 20 (C), part 18: structured prediction. A BiLSTM-CRF tagger as the PyTorch NLP
tutorial writes it, batched: transitions as a Parameter with the START/STOP rows set to
-10000 under no_grad, the forward algorithm by logsumexp over (prev + transition) in a loop
over time with a mask blending torch.where(mask_t, next, prev), the gold path score by
gather of emissions and indexing of transitions, the NLL averaged; Viterbi decoding in eval
with max over the previous tag and backpointers followed with .item()/.tolist() outside the
compiled step. Then a token classifier with CrossEntropyLoss(weight=class_weights,
ignore_index=-100, label_smoothing=0.1) over (N, C, T) logits, the weighted-mean semantics
of each option. Run with PyTorch, with llgrad eagerly and with llgrad.compile
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def bilstm_crf(torch, env):
    nn = torch.nn
    V, n_tags, E, H = 12, 5, 6, 8
    START, STOP = n_tags, n_tags + 1
    T_ = n_tags + 2

    class BiLSTM_CRF(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.lstm = nn.LSTM(E, H // 2, bidirectional=True, batch_first=True)
            self.hidden2tag = nn.Linear(H, T_)
            self.transitions = nn.Parameter(env.randn(T_, T_))
            with torch.no_grad():
                self.transitions.data[START, :] = -10000
                self.transitions.data[:, STOP] = -10000

        def emissions(self, x):
            return self.hidden2tag(self.lstm(self.emb(x))[0])

        def forward_alg(self, feats, mask):
            B, L, _ = feats.shape
            alpha = torch.full((B, T_), -10000.0)
            alpha[:, START] = 0.0
            for t in range(L):
                nxt = torch.logsumexp(alpha.unsqueeze(1) + self.transitions.unsqueeze(0), dim=2) + feats[:, t]
                alpha = torch.where(mask[:, t].unsqueeze(1), nxt, alpha)
            return torch.logsumexp(alpha + self.transitions[STOP].unsqueeze(0), dim=1)

        def score_sentence(self, feats, tags, mask):
            B, L, _ = feats.shape
            tags = torch.cat([torch.full((B, 1), START, dtype=torch.long), tags], dim=1)
            score = torch.zeros(B)
            for t in range(L):
                emit = feats[:, t].gather(1, tags[:, t + 1].unsqueeze(1)).squeeze(1)
                trans = self.transitions[tags[:, t + 1], tags[:, t]]
                score = score + (emit + trans) * mask[:, t]
            last = tags.gather(1, mask.long().sum(1, keepdim=True)).squeeze(1)
            return score + self.transitions[STOP, last]

        def neg_log_likelihood(self, x, tags, mask):
            feats = self.emissions(x)
            return (self.forward_alg(feats, mask) - self.score_sentence(feats, tags, mask)).mean()

        def viterbi_scores(self, x):
            feats = self.emissions(x)
            B, L, _ = feats.shape
            v = torch.full((B, T_), -10000.0)
            v[:, START] = 0.0
            backpointers = []
            for t in range(L):
                scores = v.unsqueeze(1) + self.transitions.unsqueeze(0)
                best, idx = scores.max(dim=2)
                backpointers.append(idx)
                v = best + feats[:, t]
            terminal = v + self.transitions[STOP].unsqueeze(0)
            return terminal, torch.stack(backpointers, 1)

    model = env.init(BiLSTM_CRF())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, weight_decay=1e-4)
    x = env.randint(0, V, (3, 6))
    tags = env.randint(0, n_tags, (3, 6))
    lengths = torch.tensor([6, 4, 5])
    mask = torch.arange(6)[None, :] < lengths[:, None]

    def train_step(x, tags, mask):
        model.zero_grad()
        loss = model.neg_log_likelihood(x, tags, mask)
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"nll{i}", train_step(x, tags, mask))
    model.eval()
    with torch.no_grad():
        terminal, bp = env.step(model.viterbi_scores)(x)
    paths = []
    for b in range(x.shape[0]):
        best = terminal[b].argmax().item()
        path = [best]
        for t in range(x.shape[1] - 1, 0, -1):
            best = bp[b, t, best].item()
            path.append(best)
        paths.append(path[::-1])
    env.rec("viterbi", (terminal, paths))
    env.rec("state", model.state_dict())


def weighted_token_ce(torch, env):
    nn = torch.nn
    C = 4
    model = env.init(nn.Sequential(nn.Conv1d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv1d(8, C, 1)))
    weights = torch.tensor([0.2, 1.0, 2.0, 0.5])
    losses = {
        "plain": nn.CrossEntropyLoss(weight=weights),
        "ignore": nn.CrossEntropyLoss(weight=weights, ignore_index=-100),
        "smooth": nn.CrossEntropyLoss(weight=weights, ignore_index=-100, label_smoothing=0.1),
        "sum": nn.CrossEntropyLoss(weight=weights, ignore_index=-100, label_smoothing=0.2, reduction="sum"),
        "none": nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1, reduction="none"),
    }
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = env.randn(3, 3, 7)
    y = env.randint(0, C, (3, 7))
    y_ign = y.clone()
    y_ign[0, 5:] = -100
    y_ign[2, :2] = -100

    def step(x, y, y_ign):
        logits = model(x)
        out = {"plain": losses["plain"](logits, y)}
        for k in ("ignore", "smooth", "sum"):
            out[k] = losses[k](logits, y_ign)
        none = losses["none"](logits, y_ign)
        total = out["smooth"] + 0.01 * out["sum"] + none.mean()
        opt.zero_grad()
        total.backward()
        opt.step()
        return out, none
    step = env.step(step)
    for i in range(3):
        env.rec(f"step{i}", step(x, y, y_ign))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [bilstm_crf, weighted_token_ce])
def test_structured(program):
    run_tutorial(program)
