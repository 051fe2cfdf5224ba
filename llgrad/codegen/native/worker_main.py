"""LLVM's side of code generation, written to run in either process: the compile worker
(worker.py starts this file by path, as a process of its own that imports nothing of llgrad)
and, where there is no worker, llgrad's own process (host.py and jit.py import the two
functions below). One definition of how the host is described and how a module is optimised
and turned into an object file keeps the two processes' machine code identical.

The worker reads requests from stdin and writes replies to stdout, each a pickle behind its
8-byte length: ("describe", env) -> the host's description; ("generate", text, host, mode,
keep_ir) -> (object bytes, IR after optimisation or ""), mode "O3" (optimised at O3),
"O3-noopt" (O3 code generation, no IR passes) or "O0"; ("timeline",) -> the worker's
[(what, time.monotonic())] marks, kept under LLGRAD_TIMELINE=1 (timeline.py). A failure
replies ("error", text). It exits when stdin closes or after IDLE_SECONDS
(LLGRAD_COMPILE_WORKER_IDLE) without a request.

worker.py starts it as `python -I -S` (no site, no .pth files) with llvmlite's directory
given: it imports a little of the standard library and llvmlite, nothing else."""
import os
import pickle
import select
import struct
import sys
import time

_MARKS = [("worker python up", time.monotonic())] \
    if os.environ.get("LLGRAD_TIMELINE", "0") == "1" else None

IDLE_SECONDS = float(os.environ.get("LLGRAD_COMPILE_WORKER_IDLE", "60"))


def ask_llvm(llvm, avx512=None):
    """The host's description from LLVM itself (llvm: llvmlite.binding, initialised)."""
    if avx512 is None:
        avx512 = os.environ.get("LLGRAD_AVX512", "1")
    target = llvm.Target.from_default_triple()
    cpu = llvm.get_host_cpu_name()
    feats = llvm.get_host_cpu_features()
    features = feats.flatten()
    # LLVM's x86 tuning caps vectors at 256 bits even where AVX-512 exists; the fused math
    # loops run ~1.5x faster at 512 (LLGRAD_AVX512=0 keeps 256)
    vector_bits = 256 if feats.get("avx2") else 128
    if feats.get("avx512f") and feats.get("avx512vl") and feats.get("avx512dq") \
            and avx512 != "0":
        features += ",-prefer-256-bit"
        vector_bits = 512
    tm = target.create_target_machine(cpu=cpu, features=features, opt=3, jit=True)
    return {"cpu": cpu, "features": features, "vector_bits": vector_bits,
            "triple": tm.triple, "data_layout": str(tm.target_data),
            "llvm_version": ".".join(map(str, llvm.llvm_version_info))}


def optimize(llvm, llmod, tm, speed_level=3):
    """LLVM's O3 module pipeline, loop and SLP vectorisation on, loop unrolling off."""
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_interleaving = True
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(llmod, pb)


def generate(llvm, tm, text, triple, data_layout, optimise, keep_ir):
    """(object bytes, IR text after optimisation or "") of a module's IR text."""
    llmod = llvm.parse_assembly(text, context=llvm.create_context())
    llmod.triple = triple
    llmod.data_layout = data_layout
    llmod.verify()
    if optimise:
        optimize(llvm, llmod, tm)
    obj = tm.emit_object(llmod)
    return obj, (str(llmod) if keep_ir else "")


def _read(f):
    head = f.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    body = f.read(n)
    return pickle.loads(body) if len(body) == n else None


def _write(f, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(struct.pack("<Q", len(data)) + data)
    f.flush()


def _mark(what):
    if _MARKS is not None:
        _MARKS.append((what, time.monotonic()))


def serve(inp, out):
    import llvmlite.binding as llvm
    _mark("worker llvmlite imported")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    _mark("worker llvm initialised")
    machines = {}
    while True:
        ready, _, _ = select.select([inp], [], [], IDLE_SECONDS)
        if not ready:
            return
        req = _read(inp)
        if req is None:
            return
        _mark(f"worker got {req[0]}")
        try:
            if req[0] == "timeline":
                reply = list(_MARKS or ())
            elif req[0] == "describe":
                reply = ask_llvm(llvm, req[1])
            else:
                _, text, host, mode, keep_ir = req
                key = (host["cpu"], host["features"], mode)
                tm = machines.get(key)
                if tm is None:
                    tm = machines[key] = llvm.Target.from_default_triple().create_target_machine(
                        cpu=host["cpu"], features=host["features"],
                        opt=0 if mode == "O0" else 3, jit=True)
                reply = generate(llvm, tm, text, host["triple"], host["data_layout"],
                                 mode == "O3", keep_ir)
        except Exception as e:      # noqa: BLE001 (reported: the parent retries in-process)
            reply = ("error", f"{type(e).__name__}: {e}")
        _mark(f"worker done {req[0]}")
        _write(out, reply)


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
