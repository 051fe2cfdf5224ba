"""Sweep 17 (D), part 9: Karpathy's makemore.py (CharDataset, an InfiniteDataLoader over
RandomSampler(replacement=True, num_samples=1e10), the train/test split by torch.randperm,
hand-written RNN / GRU cells and the causal bag-of-words, ignore_index=-1 targets,
inference_mode evaluation over shuffled DataLoaders, sampling and greedy generation). Every
draw comes from the library's own generators. See tutorial_harness.py."""
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402
from courses_sweep17_words import WORDS  # noqa: E402

pytestmark = pytest.mark.torch


@dataclass
class ModelConfig:
    block_size: int = None
    vocab_size: int = None
    n_embd: int = 16
    n_embd2: int = 16


def make(torch):
    nn, F = torch.nn, torch.nn.functional
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader

    class CharDataset(Dataset):
        def __init__(self, words, chars, max_word_length):
            self.words = words
            self.chars = chars
            self.max_word_length = max_word_length
            self.stoi = {ch: i + 1 for i, ch in enumerate(chars)}
            self.itos = {i: s for s, i in self.stoi.items()}
        def __len__(self):
            return len(self.words)
        def get_vocab_size(self):
            return len(self.chars) + 1
        def get_output_length(self):
            return self.max_word_length + 1
        def encode(self, word):
            return torch.tensor([self.stoi[w] for w in word], dtype=torch.long)
        def decode(self, ix):
            return ''.join(self.itos[i] for i in ix)
        def __getitem__(self, idx):
            word = self.words[idx]
            ix = self.encode(word)
            x = torch.zeros(self.max_word_length + 1, dtype=torch.long)
            y = torch.zeros(self.max_word_length + 1, dtype=torch.long)
            x[1:1 + len(ix)] = ix
            y[:len(ix)] = ix
            y[len(ix) + 1:] = -1
            return x, y

    class InfiniteDataLoader:
        def __init__(self, dataset, **kwargs):
            train_sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=int(1e10))
            self.train_loader = DataLoader(dataset, sampler=train_sampler, **kwargs)
            self.data_iter = iter(self.train_loader)
        def next(self):
            try:
                batch = next(self.data_iter)
            except StopIteration:
                self.data_iter = iter(self.train_loader)
                batch = next(self.data_iter)
            return batch

    class RNNCell(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.xh_to_h = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        def forward(self, xt, hprev):
            xh = torch.cat([xt, hprev], dim=1)
            return F.tanh(self.xh_to_h(xh))

    class GRUCell(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.xh_to_z = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
            self.xh_to_r = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
            self.xh_to_hbar = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        def forward(self, xt, hprev):
            xh = torch.cat([xt, hprev], dim=1)
            r = F.sigmoid(self.xh_to_r(xh))
            hprev_reset = r * hprev
            xhr = torch.cat([xt, hprev_reset], dim=1)
            hbar = F.tanh(self.xh_to_hbar(xhr))
            z = F.sigmoid(self.xh_to_z(xh))
            return (1 - z) * hprev + z * hbar

    class RNN(nn.Module):
        def __init__(self, config, cell_type):
            super().__init__()
            self.block_size = config.block_size
            self.vocab_size = config.vocab_size
            self.start = nn.Parameter(torch.zeros(1, config.n_embd2))
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.cell = RNNCell(config) if cell_type == 'rnn' else GRUCell(config)
            self.lm_head = nn.Linear(config.n_embd2, self.vocab_size)
        def get_block_size(self):
            return self.block_size
        def forward(self, idx, targets=None):
            b, t = idx.size()
            emb = self.wte(idx)
            hprev = self.start.expand((b, -1))
            hiddens = []
            for i in range(t):
                xt = emb[:, i, :]
                ht = self.cell(xt, hprev)
                hprev = ht
                hiddens.append(ht)
            hidden = torch.stack(hiddens, 1)
            logits = self.lm_head(hidden)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

    class CausalBoW(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.block_size = config.block_size
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                 .view(1, config.block_size, config.block_size))
        def forward(self, x):
            B, T, C = x.size()
            att = torch.zeros((B, T, T), device=x.device)
            att = att.masked_fill(self.bias[:, :T, :T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            return att @ x

    class BoW(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.block_size = config.block_size
            self.vocab_size = config.vocab_size
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn.Embedding(config.block_size, config.n_embd)
            self.context_block = CausalBoW(config)
            self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
                                          c_proj=nn.Linear(4 * config.n_embd, config.n_embd)))
            m = self.mlp
            self.mlpf = lambda x: m.c_proj(F.tanh(m.c_fc(x)))
            self.lm_head = nn.Linear(config.n_embd, self.vocab_size)
        def get_block_size(self):
            return self.block_size
        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            x = x + self.context_block(x)
            x = x + self.mlpf(x)
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

    @torch.no_grad()
    def generate(model, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
        block_size = model.get_block_size()
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
            logits, _ = model(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, top_k)
                logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits, dim=-1)
            if do_sample:
                idx_next = torch.multinomial(probs, num_samples=1)
            else:
                _, idx_next = torch.topk(probs, k=1, dim=-1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx
    return CharDataset, InfiniteDataLoader, RNN, BoW, generate


def makemore_py(torch, env, kind="gru"):
    CharDataset, InfiniteDataLoader, RNN, BoW, generate = make(torch)
    torch.manual_seed(3407)
    words = [w.strip() for w in WORDS]
    chars = sorted(list(set(''.join(words))))
    max_word_length = max(len(w) for w in words)
    test_set_size = min(1000, int(len(words) * 0.1))
    rp = torch.randperm(len(words)).tolist()
    train_words = [words[i] for i in rp[:-test_set_size]]
    test_words = [words[i] for i in rp[-test_set_size:]]
    env.rec("split", (len(train_words), test_words))
    train_dataset = CharDataset(train_words, chars, max_word_length)
    test_dataset = CharDataset(test_words, chars, max_word_length)
    config = ModelConfig(vocab_size=train_dataset.get_vocab_size(), block_size=train_dataset.get_output_length())
    model = BoW(config) if kind == "bow" else RNN(config, kind)
    env.rec("params", sum(p.numel() for p in model.parameters()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
    batch_loader = InfiniteDataLoader(train_dataset, batch_size=8, pin_memory=True, num_workers=0)

    def step(X, Y):
        logits, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss
    step = env.step(step)
    for i in range(5):
        batch = batch_loader.next()
        X, Y = batch
        env.rec(f"batch {i}", X)
        env.rec(f"loss {i}", step(X, Y))

    @torch.inference_mode()
    def evaluate(model, dataset, batch_size=50, max_batches=None):
        model.eval()
        loader = torch.utils.data.DataLoader(dataset, shuffle=True, batch_size=batch_size, num_workers=0)
        losses = []
        for i, batch in enumerate(loader):
            X, Y = batch
            logits, loss = model(X, Y)
            losses.append(loss.item())
            if max_batches is not None and i >= max_batches:
                break
        mean_loss = torch.tensor(losses).mean().item()
        model.train()
        return mean_loss
    env.rec("eval", (evaluate(model, train_dataset, batch_size=16, max_batches=2), evaluate(model, test_dataset)))
    X_init = torch.zeros(4, 1, dtype=torch.long)
    top_k = None
    steps = train_dataset.get_output_length() - 1
    X_samp = generate(model, X_init, steps, top_k=top_k, do_sample=True).to('cpu')
    samples = []
    for i in range(X_samp.size(0)):
        row = X_samp[i, 1:].tolist()
        crop_index = row.index(0) if 0 in row else len(row)
        row = row[:crop_index]
        samples.append(train_dataset.decode(row))
    env.rec("samples", samples)
    env.rec("greedy", generate(model, X_init[:1], 5, do_sample=False))

def makemore_rnn(torch, env):
    makemore_py(torch, env, "rnn")

def makemore_bow(torch, env):
    makemore_py(torch, env, "bow")


@pytest.mark.parametrize("program", [makemore_py, pytest.param(makemore_rnn, marks=pytest.mark.slow),
                                     makemore_bow])
def test_makemore_py(program):
    run_tutorial(program)
