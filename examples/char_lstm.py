"""A character-level language model on nn.LSTM (embedding, a 2-layer LSTM, a linear head),
trained with Adam and gradient clipping on examples/data/tiny_text.txt; prints the loss
falling and a greedy sample at the end, generated one character at a time with the LSTM's
state (h, c) carried from step to step.

    python examples/char_lstm.py              # compiled training step (default)
    python examples/char_lstm.py --eager      # op-by-op eager autograd
    python examples/char_lstm.py --steps 50   # shorter run
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
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--embed", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm")
    p.add_argument("--sample-len", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--compile", dest="compile", action="store_true", default=True,
                      help="run the training step through llgrad.compile (default)")
    mode.add_argument("--eager", dest="compile", action="store_false",
                      help="run the training step eagerly")
    return p.parse_args()


class CharLSTM(nn.Module):
    def __init__(self, vocab, embed, hidden, layers, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, dropout=dropout, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx, state=None):
        out, state = self.lstm(self.embed(idx), state)           # B T H, ((L B H), (L B H))
        return self.head(out), state                              # B T V


def train_step(model, opt, xb, yb, clip):
    opt.zero_grad()
    logits, _ = model(xb)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1))
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.detach()


def generate(model, prompt, n, stoi, itos):
    """Greedy decoding: the prompt sets the state, then one character per LSTM call."""
    model.eval()
    idx = [stoi[c] for c in prompt]
    with llgrad.no_grad():
        logits, state = model(llgrad.tensor([idx]))
        for _ in range(n):
            idx.append(logits[0, -1].argmax().item())
            logits, state = model(llgrad.tensor([[idx[-1]]]), state)
    model.train()
    return "".join(itos[i] for i in idx)


def main():
    args = parse_args()
    llgrad.manual_seed(args.seed)
    with open(DATA, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi, itos = {c: i for i, c in enumerate(chars)}, dict(enumerate(chars))
    data = np.array([stoi[c] for c in text], dtype=np.int64)

    model = CharLSTM(len(chars), args.embed, args.hidden, args.layers, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    opt = llgrad.optim.Adam(model.parameters(), lr=args.lr)
    step = llgrad.compile(train_step) if args.compile else train_step
    print(f"text: {len(text)} chars, vocab {len(chars)}; LSTM embed={args.embed} "
          f"hidden={args.hidden} layers={args.layers} dropout={args.dropout}, sequences of "
          f"{args.seq_len}, {n_params} parameters; Adam lr={args.lr}; "
          f"{'compiled' if args.compile else 'eager'} step")
    print(f"uniform-guess loss would be ln({len(chars)}) = {math.log(len(chars)):.3f}")

    rng = np.random.default_rng(args.seed)
    offsets = np.arange(args.seq_len + 1)
    t0, running, report = time.perf_counter(), [], max(1, args.steps // 10)
    for it in range(1, args.steps + 1):
        starts = rng.integers(0, len(data) - args.seq_len - 1, args.batch)
        chunk = data[starts[:, None] + offsets]                       # B x (seq_len + 1)
        xb, yb = llgrad.from_numpy(chunk[:, :-1].copy()), llgrad.from_numpy(chunk[:, 1:].copy())
        running.append(step(model, opt, xb, yb, args.clip).item())
        if it == 1 or it % report == 0 or it == args.steps:
            print(f"step {it:4d}  loss {np.mean(running):.4f}  "
                  f"({time.perf_counter() - t0:.1f} s)")
            running = []
    traced = f" (step traced {step.n_traces}x)" if args.compile else ""
    print(f"trained in {time.perf_counter() - t0:.1f} s{traced}")
    print("greedy sample:")
    print(generate(model, "The lamp", args.sample_len, stoi, itos))


if __name__ == "__main__":
    main()
