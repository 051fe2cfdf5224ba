"""Training steps of the recurrent and attention layers on 1 thread: a character-level LSTM
language model (Embedding, nn.LSTM, Linear; cross-entropy; Adam) and a small transformer
encoder classifier (Linear in, nn.TransformerEncoder, mean pool, Linear; cross-entropy;
AdamW), each as llgrad eager, llgrad.compile of the step, and torch eager, from the same
weights (torch's state_dict loaded into llgrad) and data.

    python bench/seq_models.py [--quick] [--seq-len 32] [--hidden 128]

Prints the median milliseconds per step over interleaved blocks (measure.py), the losses of
4 fresh steps against torch's, and the compile figures of llgrad's step: the seconds of the
first call that traces and of the call that compiles (LLVM, with the disk cache off), and the
op count of the compiled graph."""
import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"
os.environ["LLGRAD_CACHE_DIR"] = "0"          # the compile time is measured cold

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402

VOCAB, BATCH = 40, 32


def lstm_model(lib, hidden, layers):
    nn = lib.nn

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 32)
            self.lstm = nn.LSTM(32, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Linear(hidden, VOCAB)

        def forward(self, x):
            return self.head(self.lstm(self.emb(x))[0]).reshape(-1, VOCAB)
    return CharLM()


def encoder_model(lib, d_model, layers):
    nn = lib.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(16, d_model)
            layer = nn.TransformerEncoderLayer(d_model, 4, 2 * d_model, dropout=0.0,
                                               activation="gelu", batch_first=True)
            self.enc = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(d_model, 10)

        def forward(self, x):
            return self.head(self.enc(self.inp(x)).mean(1))
    return Classifier()


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = model.loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def build(system, case, opts, torch_state):
    """(step function, state_dict) for a system; llgrad loads torch's state_dict."""
    import torch
    lib = torch
    if system.startswith("llgrad"):
        import llgrad
        llgrad.set_num_threads(1)
        lib = llgrad
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case == "lstm":
            model = lstm_model(lib, opts.hidden, opts.layers)
            x = rng.integers(0, VOCAB, (BATCH, opts.seq_len))
            y = rng.integers(0, VOCAB, BATCH * opts.seq_len)
        else:
            model = encoder_model(lib, opts.d_model, opts.layers)
            x = rng.standard_normal((BATCH, opts.seq_len, 16)).astype(np.float32)
            y = rng.integers(0, 10, BATCH)
    if torch_state is not None:
        model.load_state_dict({k: lib.tensor(v.numpy().copy()) for k, v in torch_state.items()})
    state = {k: v.detach().clone() for k, v in model.state_dict().items()} if lib is torch \
        else None
    model.loss_fn = lib.nn.CrossEntropyLoss()
    opt = (lib.optim.Adam if case == "lstm" else lib.optim.AdamW)(model.parameters(), lr=1e-3)
    xt, yt = lib.tensor(x), lib.tensor(y)
    run = lib.compile(_step) if system == "llgrad compile(step)" else _step
    return (lambda: run(model, opt, xt, yt).item()), state, run


class _Runner:
    def __init__(self, system, step):
        self.system, self.step = system, step


SYSTEMS = ["llgrad eager", "llgrad compile(step)", "torch eager"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128, help="the LSTM's hidden size")
    p.add_argument("--d-model", type=int, default=64, help="the encoder's width")
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--cases", default="lstm,encoder")
    opts = p.parse_args(argv)
    blocks, seconds = (3, 0.2) if opts.quick else (7, 0.5)
    for case in opts.cases.split(","):
        _, torch_state, _ = build("torch eager", case, opts, None)
        losses, compile_info = {}, ""
        for s in SYSTEMS:                     # four fresh steps from the same start
            step, _, run = build(s, case, opts, torch_state)
            t = [time.perf_counter()]
            out = []
            for _ in range(4):
                out.append(step())
                t.append(time.perf_counter())
            losses[s] = np.array(out)
            if s == "llgrad compile(step)":
                ops = max((len(e.forward.nodes) for e in run.entries), default=0)
                ops = f"; the step's graph: {ops} ops" if ops else ""
                compile_info = (f"first call (trace) {t[1] - t[0]:.2f} s, second (trace "
                                f"again: the optimiser made its state) {t[2] - t[1]:.2f} s, "
                                f"third (LLVM, cold) {t[3] - t[2]:.2f} s{ops}")
        runners, per_call = [], {}
        for s in SYSTEMS:
            step, _, _ = build(s, case, opts, torch_state)
            runner = _Runner(s, step)
            per_call[s] = measure.warm_up(runner, 4, 0.3)[2]
            runners.append(runner)
        times, errors = measure.interleaved(runners, per_call, blocks, seconds)
        what = (f"LSTM char-LM: batch {BATCH}, {opts.seq_len} steps, hidden {opts.hidden}, "
                f"{opts.layers} layer(s), Adam" if case == "lstm" else
                f"TransformerEncoder classifier: batch {BATCH}, {opts.seq_len} tokens, d_model "
                f"{opts.d_model}, 4 heads, {opts.layers} layer(s), gelu, AdamW")
        print(f"\n{what} (1 thread, median ms per step over {blocks} blocks)")
        ref, torch_ms = losses["torch eager"], statistics.median(times["torch eager"]) / 1000
        for s in SYSTEMS:
            if s in errors:
                print(f"  {s:22s} error: {errors[s].strip().splitlines()[-1]}")
                continue
            med = statistics.median(times[s]) / 1000
            err = float(np.max(np.abs(losses[s] - ref) / np.abs(ref)))
            print(f"  {s:22s} {med:9.2f} ms  {med / torch_ms:5.2f}x torch  losses err "
                  f"{err:.1e} {'OK' if err <= 1e-4 else 'MISMATCH'}")
        print(f"  llgrad compile: {compile_info}")


if __name__ == "__main__":
    main()
