"""Programs of common kinds: an energy-based model trained by contrastive divergence with
Langevin sampling (torch.autograd.grad of the energy inside the compiled step, a replay
buffer of samples); a learning-to-rank model (ListNet's softmax cross-entropy over lists
with a padding mask, and RankNet's pairwise logistic loss; NDCG@k from torch ops); a
transformer decoder (nn.TransformerDecoder with a causal mask) that continues sequences by
beam search. Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def energy_based_model(torch, env):
    nn, optim = torch.nn, torch.optim
    step_size, noise, n_steps, alpha = 0.1, 0.005, 5, 0.1

    model = env.init(nn.Sequential(nn.Linear(2, 32), nn.SiLU(), nn.Linear(32, 32), nn.SiLU(),
                                   nn.Linear(32, 1)))
    optimizer = optim.Adam(model.parameters(), lr=1e-3, betas=(0.0, 0.999))
    centers = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])

    def langevin(x, noises):
        x = x.clone().requires_grad_(True)
        for k in range(n_steps):
            energy = model(x).sum()
            grad = torch.autograd.grad(energy, x)[0]
            x = (x - step_size * grad + noises[k]).detach().requires_grad_(True)
        return x.detach()

    def train_step(real, init, noises):
        model.train()
        fake = langevin(init, noises)
        e_real, e_fake = model(real), model(fake)
        loss = e_real.mean() - e_fake.mean() + alpha * (e_real.pow(2).mean()
                                                        + e_fake.pow(2).mean())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item(), fake

    train_step = env.step(train_step)
    buffer = env.rand(32, 2) * 4 - 2
    for it in range(6):
        real = centers[env.randint(0, 2, (16,))] + 0.2 * env.randn(16, 2)
        idx = env.randint(0, 32, (16,))
        fresh = env.rand(16, 1) < 0.05
        init = torch.where(fresh, env.rand(16, 2) * 4 - 2, buffer[idx])
        loss, fake = train_step(real, init, noise * env.randn(n_steps, 16, 2))
        buffer[idx] = fake
        env.rec(f"step {it}", (loss, fake))
    with torch.no_grad():
        grid = torch.stack(torch.meshgrid(torch.linspace(-2, 2, 5), torch.linspace(-2, 2, 5),
                                          indexing="ij"), dim=-1).view(-1, 2)
        env.rec("energy", model(grid).view(5, 5))


def learning_to_rank(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_lists, list_len, n_feat = 12, 6, 5

    model = env.init(nn.Sequential(nn.Linear(n_feat, 16), nn.ReLU(), nn.Linear(16, 1)))
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    features = env.randn(n_lists, list_len, n_feat)
    relevance = (features @ env.randn(n_feat)).clamp(-1.5, 1.5).add(1.5).round()   # 0..3
    lengths = env.randint(3, list_len + 1, (n_lists,))
    pad = torch.arange(list_len)[None, :] >= lengths[:, None]

    def listnet_loss(scores, rel, pad):
        scores = scores.masked_fill(pad, float("-inf"))
        target = F.softmax(rel.masked_fill(pad, float("-inf")), dim=1)
        return -(target * F.log_softmax(scores, dim=1).masked_fill(pad, 0.0)).sum(1).mean()

    def ranknet_loss(scores, rel, pad):
        diff = scores[:, :, None] - scores[:, None, :]
        better = (rel[:, :, None] > rel[:, None, :]) & ~pad[:, :, None] & ~pad[:, None, :]
        return F.softplus(-diff)[better].mean()

    def ndcg_at_k(scores, rel, pad, k=3):
        scores = scores.masked_fill(pad, float("-inf"))
        order = scores.argsort(dim=1, descending=True)
        gains = (2 ** rel.gather(1, order) - 1).masked_fill(pad.gather(1, order), 0.0)
        discounts = 1.0 / torch.log2(torch.arange(2, list_len + 2).float())
        dcg = (gains * discounts)[:, :k].sum(1)
        ideal = (2 ** rel.masked_fill(pad, 0.0).sort(dim=1, descending=True).values - 1)
        idcg = (ideal * discounts)[:, :k].sum(1)
        return (dcg / idcg.clamp(min=1e-8)).mean()

    def train_step(x, rel, pad, pairwise):
        optimizer.zero_grad()
        scores = model(x).squeeze(-1)
        loss = ranknet_loss(scores, rel, pad) if pairwise else listnet_loss(scores, rel, pad)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        pairwise = epoch >= 2
        for start in range(0, n_lists, 6):
            sl = slice(start, start + 6)
            env.rec(f"loss {epoch} {start}", train_step(features[sl], relevance[sl], pad[sl],
                                                        pairwise))
        with torch.no_grad():
            env.rec(f"ndcg {epoch}", ndcg_at_k(model(features).squeeze(-1), relevance, pad))


def transformer_beam_search(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    V, D, BOS, EOS, T = 8, 16, 0, 1, 7

    class DecoderLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D)
            self.pos = nn.Parameter(torch.zeros(1, T, D))
            layer = nn.TransformerDecoderLayer(D, nhead=2, dim_feedforward=32, dropout=0.0,
                                               batch_first=True)
            self.decoder = nn.TransformerDecoder(layer, num_layers=2)
            self.memory = nn.Parameter(torch.randn(1, 2, D) * 0.1)   # (a learned prefix)
            self.out = nn.Linear(D, V)

        def forward(self, tokens):
            t = tokens.size(1)
            x = self.embed(tokens) * math.sqrt(D) + self.pos[:, :t]
            mask = nn.Transformer.generate_square_subsequent_mask(t)
            h = self.decoder(x, self.memory.expand(tokens.size(0), -1, -1), tgt_mask=mask,
                             tgt_is_causal=True)
            return self.out(h)

    model = env.init(DecoderLM())
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    # sequences: BOS, then a count up modulo 6 from a random start (tokens 2..7), then EOS
    starts = env.randint(0, 6, (16,))
    body = torch.stack([(starts + k) % 6 + 2 for k in range(T - 2)], dim=1)
    seqs = torch.cat([torch.full((16, 1), BOS), body, torch.full((16, 1), EOS)], dim=1)

    def train_step(seqs):
        model.train()
        optimizer.zero_grad()
        logits = model(seqs[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), seqs[:, 1:].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"loss {epoch}", train_step(seqs[:8]))
        env.rec(f"loss {epoch} b", train_step(seqs[8:]))

    @torch.no_grad()
    def beam_search(prefix, beam_size=3, max_len=T):
        beams = prefix.unsqueeze(0)                     # (beams, t)
        scores = torch.zeros(1)
        finished = []
        while beams.size(1) < max_len and beams.size(0) > 0:
            log_probs = F.log_softmax(model(beams)[:, -1], dim=-1)       # (beams, V)
            cand = (scores[:, None] + log_probs).view(-1)
            top_scores, top = cand.topk(min(beam_size, cand.numel()))
            beam_idx, token = top // V, top % V
            beams = torch.cat([beams.index_select(0, beam_idx), token[:, None]], dim=1)
            scores = top_scores
            done = token == EOS
            finished += [(s.item(), b.tolist()) for s, b in zip(scores[done], beams[done])]
            beams, scores = beams[~done], scores[~done]
        finished += [(s.item(), b.tolist()) for s, b in zip(scores, beams)]
        return max(finished, key=lambda sb: sb[0] / len(sb[1]))

    model.eval()
    env.rec("beams", [beam_search(seqs[i, :3]) for i in range(3)])
