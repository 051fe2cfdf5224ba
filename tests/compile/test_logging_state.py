"""A compiled function that reaches a logging.Logger (a module-level `log`) walks the
`logging` state; llgrad's own loggers, made lazily while a call was traced, showed there as
a change of the function's (the traced run not kept, its numbers guarded by value: a trace
per call). They are made before the walk now (compile/log.ready). In a fresh process: the
loggers must not exist before the first trace."""
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent('''
    import logging, sys, warnings
    import llgrad
    log = logging.getLogger("user")
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")

    def step(x, i):
        if i < 0:
            log.warning("negative")
        print(f"step {i}: {x.sum().item():.2f}")
        return x * 2

    f = llgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(8):
            f(llgrad.full((3,), float(i)), i)
    print("traces", f.n_traces)
''')


def test_llgrads_loggers_are_no_change_of_the_users_state(tmp_path):
    path = tmp_path / "program.py"
    path.write_text(PROGRAM)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:-1] == [f"step {i}: {3.0 * i:.2f}" for i in range(8)]
    assert int(lines[-1].split()[1]) <= 3
