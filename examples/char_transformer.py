"""A tiny character-level transformer (GPT-style, causal self-attention) trained with AdamW
on examples/data/tiny_text.txt; prints the loss falling and a greedy sample at the end.

    python examples/char_transformer.py              # compiled training step (default)
    python examples/char_transformer.py --eager      # op-by-op eager autograd
    python examples/char_transformer.py --steps 50   # shorter run
"""
import argparse
import math
import os
import time

import numpy as np

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tiny_text.txt")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--d-model", type=int, default=48)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--sample-len", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--compile", dest="compile", action="store_true", default=True,
                      help="run the training step through llgrad.compile (default)")
    mode.add_argument("--eager", dest="compile", action="store_false",
                      help="run the training step eagerly")
    return p.parse_args()


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, context):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        # True above the diagonal: position t may not look at positions > t
        self.register_buffer("mask", llgrad.from_numpy(np.triu(np.ones((context, context),
                                                                       dtype=bool), k=1)))

    def forward(self, x):
        B, T, C = x.shape
        H = self.heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))  # B H T D
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)                        # B H T T
        att = att.masked_fill(self.mask[:T, :T], float("-inf"))
        y = F.softmax(att, dim=-1) @ v                                             # B H T D
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, d, heads, context):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, context)
        # tanh-approximate GELU: the exact one evaluates erf per element in Python (slow)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, d, heads, layers, context):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.blocks = nn.ModuleList([Block(d, heads, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(llgrad.arange(T))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))                                             # B T V


def train_step(model, opt, xb, yb):
    opt.zero_grad()
    logits = model(xb)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1))
    loss.backward()
    opt.step()
    return loss.detach()


def generate(model, prompt, n, context, stoi, itos):
    idx = [stoi[c] for c in prompt]
    with llgrad.no_grad():
        for _ in range(n):
            x = llgrad.tensor([idx[-context:]])
            idx.append(model(x)[0, -1].argmax().item())      # greedy: most likely next char
    return "".join(itos[i] for i in idx)


def main():
    args = parse_args()
    llgrad.manual_seed(args.seed)
    with open(DATA, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi, itos = {c: i for i, c in enumerate(chars)}, dict(enumerate(chars))
    data = np.array([stoi[c] for c in text], dtype=np.int64)

    model = TinyGPT(len(chars), args.d_model, args.heads, args.layers, args.context)
    n_params = sum(p.numel() for p in model.parameters())
    opt = llgrad.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    step = llgrad.compile(train_step) if args.compile else train_step
    print(f"text: {len(text)} chars, vocab {len(chars)}; transformer d={args.d_model} "
          f"heads={args.heads} layers={args.layers} context={args.context}, {n_params} "
          f"parameters; AdamW lr={args.lr}; {'compiled' if args.compile else 'eager'} step")
    print(f"uniform-guess loss would be ln({len(chars)}) = {math.log(len(chars)):.3f}")

    rng = np.random.default_rng(args.seed)
    offsets = np.arange(args.context + 1)
    t0, running, report = time.perf_counter(), [], max(1, args.steps // 10)
    for it in range(1, args.steps + 1):
        starts = rng.integers(0, len(data) - args.context - 1, args.batch)
        chunk = data[starts[:, None] + offsets]                       # B x (context + 1)
        xb, yb = llgrad.from_numpy(chunk[:, :-1].copy()), llgrad.from_numpy(chunk[:, 1:].copy())
        running.append(step(model, opt, xb, yb).item())
        if it == 1 or it % report == 0 or it == args.steps:
            print(f"step {it:4d}  loss {np.mean(running):.4f}  "
                  f"({time.perf_counter() - t0:.2f} s)")
            running = []
    traced = f" (step traced {step.n_traces}x)" if args.compile else ""
    print(f"trained in {time.perf_counter() - t0:.1f} s{traced}")
    print("greedy sample:")
    print(generate(model, "The lamp", args.sample_len, args.context, stoi, itos))


if __name__ == "__main__":
    main()
