"""Time to the first results of ten training programs at tutorial sizes
(bench/first_steps_models.py: MLP, CNN with BatchNorm, ResNet-ish blocks, LSTM classifier,
ViT-tiny, GPT-2 tiny, GAN with two optimisers, VAE, seq2seq GRU, softmax regression with a
scheduler), eager and compiled with background builds, each in a fresh process, 1 thread.

    python bench/first_steps_programs.py [names,...] [--steps 20] [--llgrad PATH]

Per program: a cold kernel cache (a new directory), then warm (the same directory again);
eager fills and reuses it too (its native kernels), so each compiled row is compared with
eager on the same cache. Columns: wall and process-CPU seconds from the first call to the
5th and the --steps-th result, compiled / eager at the 5th (wall), and what each call ran:
e eager (the untraced first call, or standing in while native code is built), t traced,
n the native forward (its backward native, or on the interpreter until it is built: b);
a trailing "!" marks a program whose last call was not native; the largest relative
difference of the losses from eager's (native code sums in another order)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(name, mode, steps):
    sys.path.insert(0, HERE)
    import first_steps_models as m
    import llgrad
    from llgrad.compile import run as _run
    kinds, standing = [], []
    finish = _run.StandIn.finish

    def counted(self, fn, args, kwargs):
        standing.append(1)
        return finish(self, fn, args, kwargs)
    _run.StandIn.finish = counted
    llgrad.manual_seed(0)
    step, batches = m.PROGRAMS[name](llgrad)
    if mode == "compiled":
        step = llgrad.compile(step)
    data = [batches(i) for i in range(steps)]
    ends, cpus, mine, losses = [], [], [], []
    t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
    for i in range(steps):
        traces, stood = getattr(step, "n_traces", 0), len(standing)
        losses.append(float(step(*data[i])))
        ends.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        mine.append(time.thread_time() - m0)
        if mode == "eager" or not step.entries:
            kinds.append("e")
        elif step.n_traces != traces:
            kinds.append("t")
        elif len(standing) != stood:
            kinds.append("e")
        else:
            entry = step.entries[-1] if step.entries else None
            bwd = entry is not None and entry.backward is not None and \
                "backward" not in entry.kernels
            kinds.append("b" if bwd else "n")
    from llgrad.compile import background, eager_builds
    background.wait_all()           # (after the timed calls: the warm run's cache is filled)
    eager_builds.wait()
    timings = step.entries[-1].timings if getattr(step, "entries", None) else {}
    print(json.dumps({"timings": {k: v for k, v in timings.items() if isinstance(v, float)},
                      "ends": ends, "cpu": cpus, "mine": mine, "kinds": "".join(kinds),
                      "losses": losses,
                      "traces": getattr(step, "n_traces", 0),
                      "llvm": getattr(step, "n_llvm_compiles", 0)}))


def _run_child(root, name, mode, steps, cache):
    env = dict(os.environ, LLGRAD_NUM_THREADS="1", LLGRAD_CACHE_DIR=cache, LLGRAD_QUIET="1",
               LLGRAD_COMPILE="background", PYTHONPATH=root, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    env.pop("LLGRAD_CHECK_PREPARED", None)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, mode,
                          str(steps)], env=env, capture_output=True, text=True, timeout=900,
                         cwd=root)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(root, name, steps):
    """{(mode, warm): child result} for one program: each mode's cold run, then warm."""
    rows = {}
    for mode in ("eager", "compiled"):
        with tempfile.TemporaryDirectory() as cache:
            for warm in (False, True):
                rows[mode, warm] = _run_child(root, name, mode, steps, cache)
    return rows


def _kinds(k):
    """'eettnnn...' -> 'e2 t2 n16' (runs of one kind), '!' if the last is not native."""
    out, i = [], 0
    while i < len(k):
        j = i
        while j < len(k) and k[j] == k[i]:
            j += 1
        out.append(f"{k[i]}{j - i}")
        i = j
    return " ".join(out) + ("" if k.endswith("n") else " !")


def table(root, names, steps):
    print(f"seconds from the first call to the 5th and the {steps}th result, wall (CPU), "
          f"fresh processes, 1 thread, LLGRAD_COMPILE=background; {root}")
    print(f"{'program':<13}{'cache':<6}{'eager 5':>14}{'compiled 5':>14}{'wall x':>7}{'CPU x':>6}"
          f"{'eager ' + str(steps):>14}{'compiled ' + str(steps):>16}  traces llvm  calls")
    for name in names:
        rows = measure(root, name, steps)
        for warm in (False, True):
            e, c = rows["eager", warm], rows["compiled", warm]
            if "error" in e or "error" in c:
                print(f"{name:<13}{'warm' if warm else 'cold':<6} failed: "
                      f"{e.get('error') or c.get('error')}", flush=True)
                continue
            diff = max(abs(a - b) / max(abs(a), 1e-30) for a, b in zip(e["losses"],
                                                                       c["losses"]))
            fmt = lambda r, i: f"{r['ends'][i]:.2f} ({r['cpu'][i]:.2f})"  # noqa: E731
            print(f"{name:<13}{'warm' if warm else 'cold':<6}{fmt(e, 4):>14}{fmt(c, 4):>14}"
                  f"{c['ends'][4] / e['ends'][4]:7.2f}{c['cpu'][4] / e['cpu'][4]:6.2f}"
                  f"{fmt(e, steps - 1):>14}"
                  f"{fmt(c, steps - 1):>16}  {c['traces']:>6} {c['llvm']:>4}  "
                  f"{_kinds(c['kinds'])}  (losses rel. diff {diff:.0e})", flush=True)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    sys.path.insert(0, HERE)
    import first_steps_models as m
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="?", default=",".join(m.PROGRAMS))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--llgrad", default=os.path.join(HERE, ".."),
                   help="the llgrad tree to measure")
    a = p.parse_args(argv)
    table(os.path.abspath(a.llgrad), a.names.split(","), max(a.steps, 5))


if __name__ == "__main__":
    main()
