"""One eager training step of tutorial programs (tests/programs, tutorial_harness's
`program(torch, env)`), llgrad beside PyTorch, each on one thread, at the programs' own sizes.

    python bench/eager_tutorial_steps.py [name,...] [--blocks 7] [--seconds 0.3] [--profile N]

Each program runs once per library with an env whose env.step records the last arguments
of the first step function called with grad enabled (the training step); that call is then
replayed (the model keeps training) in interleaved blocks, the libraries' order rotating.
Prints median process-CPU milliseconds per step and llgrad / torch. --profile N runs N
llgrad steps of the first named program under cProfile instead (the eager path's hot spots).
"""
import argparse
import copy
import os
import statistics
import sys
import time

if __name__ == "__main__":
    for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                  "LLGRAD_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "tests", "programs"))
sys.path.insert(1, os.path.join(_HERE, ".."))
import llgrad  # noqa: E402
import torch  # noqa: E402
import tutorial_harness  # noqa: E402

PROGRAMS = {   # name -> (module, function)
    "quickstart": ("tutorials_quickstart", "quickstart"),
    "examples.nn_optim": ("tutorials_examples", "nn_optim"),
    "examples.custom_module": ("tutorials_examples", "custom_module"),
    "examples.dynamic_net": ("tutorials_examples", "dynamic_net"),
    "nn_really.module_and_linear": ("tutorials_nn_really", "module_and_linear"),
    "nn_really.cnn": ("tutorials_nn_really", "cnn"),
    "nlp.char_rnn_classify": ("tutorials_nlp", "char_rnn_classify"),
    "nlp.ngram": ("tutorials_nlp", "ngram"),
    "nlp.seq2seq_attention": ("tutorials_seq", "seq2seq_attention"),
    "transformer_lm": ("tutorials_seq", "transformer_lm"),
    "vae": ("tutorials_models", "vae"),
    "dqn": ("tutorials_models", "dqn"),
    "rl.actor_critic": ("tutorials_rl", "actor_critic_greedy"),
    "training.lr_schedulers": ("tutorials_training_more", "lr_schedulers"),
}


class _Capture(tutorial_harness.Env):
    """env.step returns a wrapper remembering the first training step's last call."""
    def __init__(self, *a):
        super().__init__(*a)
        self.call = None

    def step(self, fn, **options):
        lib = self.torch

        def wrapper(*args, **kwargs):
            if lib.is_grad_enabled() and (self.call is None or self.call[0] is fn):
                self.call = (fn, args, kwargs)
            return fn(*args, **kwargs)
        return wrapper


def _program(name):
    mod, fn = PROGRAMS[name]
    return getattr(__import__(mod), fn)


def capture(name):
    """-> {"torch": step(), "llgrad": step()} replaying each run's training step."""
    program, states, steps = _program(name), [], {}
    for lib, mode in ((torch, "torch"), (llgrad, "eager")):
        env = _Capture(lib, mode, states if mode == "torch" else copy.deepcopy(states))
        lib.manual_seed(0)
        try:
            program(lib, env)
        finally:
            env.close()
        fn, args, kwargs = env.call
        steps["torch" if lib is torch else "llgrad"] = (lambda f=fn, a=args, k=kwargs:
                                                       f(*a, **k))
    return steps


def _per_call(step, seconds):
    n, t0 = 0, time.process_time()
    while True:
        step()
        n += 1
        t = time.process_time() - t0
        if t >= seconds and n >= 3:
            return t / n


def measure(name, blocks, seconds):
    steps = capture(name)
    order = ["torch", "llgrad"]
    times = {k: [] for k in order}
    for k in order:
        steps[k]()
    for b in range(blocks):
        for k in (order if b % 2 == 0 else order[::-1]):
            times[k].append(_per_call(steps[k], seconds))
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def profile(name, n):
    import cProfile
    import pstats
    step = capture(name)["llgrad"]
    step()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        step()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(35)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="?", default=",".join(PROGRAMS))
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=0.3)
    ap.add_argument("--profile", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    names = a.names.split(",")
    if a.profile:
        return profile(names[0], a.profile)
    print(f"{'program':30s} {'torch ms':>9s} {'llgrad ms':>10s} {'ratio':>6s}")
    for name in names:
        try:
            r = measure(name, a.blocks, a.seconds)
        except Exception as e:     # (a step whose arguments it mutates cannot be replayed)
            print(f"{name:30s} not replayable: {type(e).__name__}: {e}", flush=True)
            continue
        print(f"{name:30s} {r['torch']:9.3f} {r['llgrad']:10.3f} "
              f"{r['llgrad'] / r['torch']:6.2f}", flush=True)


if __name__ == "__main__":
    main()
