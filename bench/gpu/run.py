"""efir's kernels against the peers of WORKLOADS.md, on one GPU, in one process
(plus a pool of worker processes that compile and check schedules).

Inputs: the Triton modules that bench/gpu/prepare.sh wrote under
bench/gpu/gen/<workload>_B<B>/ (the best candidates of each workload by
efir's static estimate). For every workload and B this script

1. draws fresh random fp16 inputs (never zeros; weights scaled by
   1/sqrt(fan-in) so that fp16 does not overflow) and computes the fp32
   PyTorch reference;
2. sweeps schedules: per candidate, DEFAULT_CONFIG, a few structured points
   and deterministic random samples of CONFIG_SPACE (`--sweep N` in all);
   every (candidate, schedule) is compiled and checked (relative L2 <= 0.01,
   fresh inputs per schedule) in `--workers` spawned processes sharing the
   GPU, each task under a timeout, which also fills Triton's on-disk cache;
3. times every correct schedule quickly (rep=8, over the same input copies
   as the final timing, so that no schedule is ranked on inputs in L2), then
   re-checks and re-times the best 4 of the case properly; times PyTorch
   eager, torch.compile and (attention) SDPA with the cuDNN and FLASH
   backends; all with CUDA-graph replays (triton.testing.do_bench_cudagraph,
   median), rotating over several copies of the inputs where they would fit
   in L2;
4. measures the two ceilings (copy bandwidth, fp16 matmul rate) and the floor
   max(bytes / bandwidth, flops / matmul rate).

Writes JSON after every case (and a Markdown report with --md), and prints a
table. Usage:
    python3 bench/gpu/run.py --out results.json [--workloads a,b] [--batches 1,8,16]
        [--compile-mode max-autotune-no-cudagraphs|default|none]
        [--candidates 4] [--sweep 24] [--workers 14] [--compile-timeout 90]
        [--compile-budget 100] [--retime 4]
        [--md report.md]
"""

import argparse
import collections
import importlib.util
import json
import math
import os
import pathlib
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
# Inductor's caches (compiled graphs, autotuning results) in one place, shared
# by the parallel warm-up processes and kept between calls on a warm machine.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(HERE / ".inductor-cache"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from triton.testing import do_bench_cudagraph  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from efir.tune import neighbours  # noqa: E402  (one step from a schedule, as the tuner moves)

GEN = HERE / "gen"
L2_BYTES = 60e6
TOL = 1e-2


# ----------------------------------------------------------------- workloads
def rms(t, eps=1e-6):
    return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps)


def rmsnorm_mlp(x, gamma, wg, wu):
    h = (rms(x.float()) * gamma.float()).to(x.dtype)
    return F.silu(h @ wg) * (h @ wu)


def rmsnorm_swiglu(x, gamma, wg, wu, wd):
    return rmsnorm_mlp(x, gamma, wg, wu) @ wd


def gated_mlp(x, w1, w2):
    return F.silu(x @ w1) * (x @ w2)


def layernorm_gemm(x, gamma, beta, w):
    h = F.layer_norm(x.float(), (x.shape[-1],), gamma.float(), beta.float(), 1e-5).to(x.dtype)
    return h @ w


def lora(x, w, a, bm):
    return x @ w + (x @ a) @ bm


def ngpt(h, x, alpha):
    hf, xf, af = h.float(), x.float(), alpha.float()
    return rms(xf + af * (rms(hf) - xf)).to(x.dtype)


def attention(q, k, v, causal):
    s = (q @ k.transpose(-1, -2)).float() * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        n = s.shape[-1]
        keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)
    return p @ v


def attn_decode(q, k, v):
    return attention(q, k, v, False)


def attn_prefill(q, k, v):
    return attention(q, k, v, True)


def shapes(name, b):
    """(name, shape, fan_in or None) per input, in the program's order."""
    if name in ("rmsnorm_mlp", "rmsnorm_swiglu"):
        s = [("x", (b, 4096), None), ("gamma", (4096,), None), ("wg", (4096, 11008), 4096), ("wu", (4096, 11008), 4096)]
        if name == "rmsnorm_swiglu":
            s.append(("wd", (11008, 4096), 11008))
        return s
    if name == "gated_mlp":
        return [("x", (b, 4096), None), ("w1", (4096, 4096), 4096), ("w2", (4096, 4096), 4096)]
    if name == "layernorm_gemm":
        return [("x", (b, 1024), None), ("gamma", (1024,), None), ("beta", (1024,), None), ("w", (1024, 4096), 1024)]
    if name == "lora":
        return [("x", (b, 4096), None), ("w", (4096, 4096), 4096), ("a", (4096, 16), 4096), ("bm", (16, 4096), 16)]
    if name == "ngpt":
        return [("h", (b, 4096), None), ("x", (b, 4096), None), ("alpha", (b, 4096), None)]
    if name == "attn_decode":
        return [("q", (b, 32, 1, 128), None), ("k", (b, 32, 4096, 128), None), ("v", (b, 32, 4096, 128), None)]
    if name == "attn_prefill":
        return [("q", (b, 32, 1024, 128), None), ("k", (b, 32, 1024, 128), None), ("v", (b, 32, 1024, 128), None)]
    raise KeyError(name)


FUNCS = {
    "rmsnorm_mlp": rmsnorm_mlp,
    "rmsnorm_swiglu": rmsnorm_swiglu,
    "gated_mlp": gated_mlp,
    "layernorm_gemm": layernorm_gemm,
    "lora": lora,
    "ngpt": ngpt,
    "attn_decode": attn_decode,
    "attn_prefill": attn_prefill,
}


def flops(name, b):
    if name == "rmsnorm_mlp":
        return 2 * 2 * b * 4096 * 11008
    if name == "rmsnorm_swiglu":
        return 3 * 2 * b * 4096 * 11008
    if name == "gated_mlp":
        return 2 * 2 * b * 4096 * 4096
    if name == "layernorm_gemm":
        return 2 * b * 1024 * 4096
    if name == "lora":
        return 2 * b * 4096 * 4096 + 2 * 2 * b * 4096 * 16
    if name == "ngpt":
        return 0
    if name == "attn_decode":
        return 2 * 2 * b * 32 * 4096 * 128
    if name == "attn_prefill":
        return 2 * 2 * b * 32 * 1024 * 1024 * 128 // 2  # causal: half the scores
    raise KeyError(name)


def make_inputs(name, b, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for _, shape, fan in shapes(name, b):
        t = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32)
        if fan:
            t = t / math.sqrt(fan)
        if name == "ngpt" and _ == "alpha":
            t = t.abs() * 0.1 + 0.05
        out.append(t.to(torch.float16))
    return out


def reference(name, inputs):
    with torch.no_grad():
        return FUNCS[name](*[t.float() for t in inputs]).float()


def rel_l2(out, ref):
    out = out.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


# ------------------------------------------------------------------- timing
def time_peers(name, b, compile_mode, copies, log):
    """The peers of WORKLOADS.md on fresh inputs, each checked against the
    fp32 reference and timed as efir is (`timed`, `copies` input sets in
    rotation): {peer: {compile_s, rel_l2, ok, time_us} or {error}}."""
    out = {}
    fn = FUNCS[name]
    inputs = make_inputs(name, b, 7)
    ref = reference(name, inputs)
    with torch.no_grad():
        peers = {"eager": fn}
        if compile_mode != "none":
            peers["compile"] = torch.compile(fn, mode=None if compile_mode == "default" else compile_mode)
        if name.startswith("attn"):
            causal = name == "attn_prefill"
            from torch.nn.attention import SDPBackend, sdpa_kernel

            for backend, key in ((SDPBackend.CUDNN_ATTENTION, "sdpa_cudnn"), (SDPBackend.FLASH_ATTENTION, "sdpa_flash")):
                def sdpa(q, k, v, backend=backend, causal=causal):
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                peers[key] = sdpa
        for key, p in peers.items():
            r = {}
            try:
                t0 = time.time()
                out_ = p(*inputs)
                torch.cuda.synchronize()
                r["compile_s"] = round(time.time() - t0, 2)
                r["rel_l2"] = rel_l2(out_, ref)
                r["ok"] = r["rel_l2"] <= TOL
                r["time_us"] = timed(p, name, b, copies)
            except Exception as e:  # noqa: BLE001
                r["error"] = _error_text(e)
            out[key] = r
            log(f"  {key}: {r.get('time_us', float('nan')):.1f} us (err {r.get('rel_l2', float('nan')):.1e}) {r.get('error', '')[:200]}")
    return out


def median_us(fn, rep=40):
    try:
        ms = do_bench_cudagraph(fn, rep=rep, return_mode="median")
    except TypeError:
        ms = do_bench_cudagraph(fn, rep=rep)
    return ms * 1000.0


def timed(fn, name, b, copies):
    """Median time of fn over `copies` input sets in rotation, per call."""
    sets = [make_inputs(name, b, 1000 + i) for i in range(copies)]

    def many():
        for s in sets:
            fn(*s)

    many()
    torch.cuda.synchronize()
    return median_us(many) / copies


def ceilings():
    """Copy bandwidth (bytes read + written per second) and the fp16 matmul
    rate, each the best of a few ways of measuring it; the variants are
    returned too."""
    seen = {}
    for mib in (512, 4096):
        n = mib << 19  # fp16 elements
        x = torch.randn(n, device="cuda", dtype=torch.float16)
        y = torch.empty_like(x)
        t = median_us(lambda: y.copy_(x))
        seen[f"copy_{mib}MiB_graph"] = 2 * n * 2 / (t * 1e-6)
        # Plain CUDA events around 10 copies after warm-up (as KINDS.md).
        for _ in range(3):
            y.copy_(x)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(10):
            y.copy_(x)
        e1.record()
        torch.cuda.synchronize()
        seen[f"copy_{mib}MiB_events"] = 10 * 2 * n * 2 / (e0.elapsed_time(e1) * 1e-3)
        t = median_us(lambda: x.sum(dtype=torch.float32))
        seen[f"read_{mib}MiB_sum"] = n * 2 / (t * 1e-6)
        del x, y
    bw = max(v for k, v in seen.items() if k.startswith("copy_"))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    bb = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    t = median_us(lambda: a @ bb)
    mm = 2 * 8192**3 / (t * 1e-6)
    seen["matmul_8192_fp16"] = mm
    del a, bb
    return bw, mm, seen


def _warm(job):
    """Compile (and run once) the torch.compile peer of each case, filling
    Inductor's cache; runs in a worker process."""
    cases, mode = job
    torch.backends.cuda.matmul.allow_tf32 = False
    done = []
    for name, b in cases:
        t0 = time.time()
        try:
            fn = torch.compile(FUNCS[name], mode=None if mode == "default" else mode)
            with torch.no_grad():
                fn(*make_inputs(name, b, 7))
            torch.cuda.synchronize()
            done.append((name, b, round(time.time() - t0, 1), ""))
        except Exception as e:  # noqa: BLE001
            done.append((name, b, round(time.time() - t0, 1), str(e)[-300:]))
        torch._dynamo.reset()
    return done


def warm_compile(cases, mode, procs, log):
    """torch.compile every case's peer in `procs` parallel processes first, so
    that the timed process finds compiled graphs and autotuning results in
    Inductor's cache (compile time, not run time, is what this saves)."""
    import multiprocessing as mp

    t0 = time.time()
    ctx = mp.get_context("spawn")
    jobs = [(cases[i::procs], mode) for i in range(procs)]
    with ctx.Pool(procs) as pool:
        for done in pool.imap_unordered(_warm, jobs):
            for name, b, s, err in done:
                log(f"  warm {name} B={b}: {s} s {err[:200]}")
    log(f"warm-up compile: {time.time() - t0:.0f} s")


# ---------------------------------------------------------------- candidates
def load(path):
    path = pathlib.Path(path)
    name = "efir_" + path.parent.name + "_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


from results_md import _best, _best_peer, report, summary, table  # noqa: E402,F401
from schedules import (  # noqa: E402,F401  (re-exported: other scripts read them from run)
    MAX_BLOCK,
    MAX_TILE,
    STAGES,
    WARPS,
    configs,
    kernel_blocks,
    sample_configs,
    schedule,
    streamed_split_k,
    tile_size,
)


def _error_text(e):
    return "".join(traceback.format_exception_only(type(e), e)).strip()[-600:]


FATAL = ("cuda error", "triton error [cuda]", "illegal memory", "illegal instruction", "unspecified launch failure", "misaligned address", "device-side assert", "cudaerror")
INFEASIBLE = ("outofresources", "out of resource", "shared memory", "too many resources", "register")


# ------------------------------------------------------- compile-and-check pool
def _check(task, mods):
    """Compile and check one (candidate, config) in a worker: fresh inputs,
    one run, relative L2 against the reference."""
    res = {"ok": False, "rel_l2": None, "error": "", "compile_s": None}
    t0 = time.time()
    inputs = ref = out = None
    try:
        path = task["path"]
        if path not in mods:
            mods[path] = load(path)
        mod = mods[path]
        for attempt in range(3):
            try:
                inputs = make_inputs(task["name"], task["b"], task["seed"])
                ref = reference(task["name"], inputs)
                t1 = time.time()
                out = mod.run(*inputs, config=task["cfg"])
                torch.cuda.synchronize()
                res["compile_s"] = round(time.time() - t1, 2)
                break
            except torch.cuda.OutOfMemoryError:
                # The GPU is shared with the other workers: wait and retry.
                inputs = ref = out = None
                torch.cuda.empty_cache()
                if attempt == 2:
                    raise
                time.sleep(2.0 * (attempt + 1))
        err = rel_l2(out, ref)
        res["rel_l2"] = err
        res["ok"] = err <= TOL
        if not res["ok"]:
            res["error"] = f"wrong: rel_l2 {err:.3g} > {TOL}"
        else:
            # One more run, timed with events (the GPU is shared, so only a
            # gross filter of hopeless schedules before the quick times).
            out = None
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            out = mod.run(*inputs, config=task["cfg"])
            e1.record()
            torch.cuda.synchronize()
            res["probe_us"] = round(e0.elapsed_time(e1) * 1000.0, 1)
    except Exception as e:  # noqa: BLE001
        res["ok"] = False
        res["error"] = _error_text(e)
        low = res["error"].lower().replace(" ", "")
        res["fatal"] = any(s.replace(" ", "") in low for s in FATAL)
        res["infeasible"] = any(s.replace(" ", "") in low for s in INFEASIBLE)
        if res["compile_s"] is None:
            res["compile_s"] = round(time.time() - t0, 2)
    finally:
        inputs = ref = out = None
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass
    res["wall_s"] = round(time.time() - t0, 2)
    return res


def _worker_loop(conn):
    """A worker process: sends {"ready"}, then answers each task with a result
    until it reads None. Exits after an error that may have broken its CUDA
    context (the pool starts another)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    mods = {}
    conn.send({"ready": os.getpid()})
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            break
        if task is None:
            break
        res = _check(task, mods)
        try:
            conn.send(res)
        except (OSError, ValueError):
            break
        if res.get("fatal"):
            conn.close()
            os._exit(3)


class CheckPool:
    """`n` spawned worker processes, one task each at a time; a task past its
    timeout, or whose worker dies, is recorded as an error and the worker
    replaced (never an exception here)."""

    START_TIMEOUT = 300.0

    def __init__(self, n, log):
        import multiprocessing as mp

        self.ctx = mp.get_context("spawn")
        self.n = max(1, n)
        self.log = log
        self.failed_starts = 0
        self.slots = [self._spawn() for _ in range(self.n)]

    def _spawn(self):
        parent, child = self.ctx.Pipe(duplex=True)
        p = self.ctx.Process(target=_worker_loop, args=(child,), name="efir-check")
        p.start()
        child.close()
        return {"proc": p, "conn": parent, "ready": False, "task": None, "t0": 0.0, "born": time.time()}

    @staticmethod
    def _kill(s):
        try:
            s["conn"].close()
        except OSError:
            pass
        p = s["proc"]
        if p.is_alive():
            p.kill()
        p.join(10)

    def _replace(self, i):
        s = self.slots[i]
        if not s["ready"]:
            self.failed_starts += 1
        self._kill(s)
        if self.failed_starts > 2 * self.n + 2:
            self.slots[i] = None  # workers do not start: give up on this slot
        else:
            self.slots[i] = self._spawn()

    def run(self, tasks, timeout, budget=0.0):
        """Results of `tasks` (dicts for _check), in order."""
        from multiprocessing.connection import wait

        results = [None] * len(tasks)
        queue = collections.deque(range(len(tasks)))
        t_start = time.time()
        while True:
            now = time.time()
            live = [s for s in self.slots if s is not None]
            if queue and (not live or (budget and now - t_start > budget)):
                why = "skipped: no worker process starts" if not live else f"skipped: compile budget of {budget:.0f} s spent"
                while queue:
                    results[queue.popleft()] = {"ok": False, "error": why, "skipped": True}
            if not queue and not any(s["task"] is not None for s in live):
                break
            for s in live:
                if s["ready"] and s["task"] is None and queue:
                    i = queue.popleft()
                    try:
                        s["conn"].send(tasks[i])
                    except (OSError, ValueError):
                        queue.appendleft(i)  # its death shows below
                        continue
                    s["task"], s["t0"] = i, time.time()
            handles = []
            for s in live:
                handles += [s["conn"], s["proc"].sentinel]
            ready = set(wait(handles, timeout=0.5))
            now = time.time()
            for j, s in enumerate(self.slots):
                if s is None:
                    continue
                dead = False
                if s["conn"] in ready:
                    try:
                        while s["conn"].poll():
                            msg = s["conn"].recv()
                            if "ready" in msg:
                                s["ready"] = True
                            elif s["task"] is not None:
                                results[s["task"]] = msg
                                s["task"] = None
                                if msg.get("fatal"):
                                    dead = True
                    except (EOFError, OSError):
                        dead = True
                if s["proc"].sentinel in ready or not s["proc"].is_alive():
                    dead = True
                if dead:
                    s["proc"].join(1)
                    if s["task"] is not None:
                        results[s["task"]] = {"ok": False, "error": f"worker died (exit code {s['proc'].exitcode})", "crashed": True}
                        s["task"] = None
                    self._replace(j)
                elif s["task"] is not None and now - s["t0"] > timeout:
                    results[s["task"]] = {"ok": False, "error": f"timeout: no result in {timeout:.0f} s", "timeout": True, "compile_s": round(now - s["t0"], 1)}
                    s["task"] = None
                    self._replace(j)
                elif not s["ready"] and now - s["born"] > self.START_TIMEOUT:
                    self._replace(j)
        return results

    def close(self):
        for s in self.slots:
            if s is None:
                continue
            try:
                s["conn"].send(None)
            except (OSError, ValueError):
                pass
        deadline = time.time() + 10
        for s in self.slots:
            if s is None:
                continue
            s["proc"].join(max(0.1, deadline - time.time()))
            self._kill(s)
        self.slots = []


# ------------------------------------------------------------------- a case
def quick_time(r, mod, qsets):
    """A quick time of one checked schedule (entry r) into r["quick_us"],
    per call over the input sets `qsets` in rotation (as the final timing
    rotates them, so that a schedule is not ranked by inputs that sit in
    L2); a failure marks it not ok."""
    cfg = r["config"]

    def many(m=mod, c=cfg):
        for s in qsets:
            m.run(*s, config=c)

    try:
        mod.run(*qsets[0], config=cfg)
        torch.cuda.synchronize()
        r["quick_us"] = median_us(many, rep=8) / len(qsets)
    except Exception as e:  # noqa: BLE001
        r["ok"] = False
        r["error"] = "main: " + _error_text(e)


def case_size(name, b):
    """{bytes, flops, copies} of a case: the bytes its inputs and result
    must move at least (fp16), its FLOPs, and how many input sets `timed`
    rotates so that they do not sit in L2."""
    nbytes = sum(math.prod(s) * 2 for _, s, _ in shapes(name, b))
    ins = make_inputs(name, b, 0)
    with torch.no_grad():
        outb = FUNCS[name](*ins).numel() * 2
    del ins
    total = nbytes + outb
    return {"bytes": total, "flops": flops(name, b), "copies": max(1, min(8, math.ceil(3 * L2_BYTES / total)))}


def bench_one(name, b, compile_mode, log, max_candidates=4, sweep=24, glob="*.py", pool=None, compile_timeout=90.0, compile_budget=0.0, retime=4, climb=3, climb_width=16):
    rec = {"workload": name, "B": b, "efir": [], "peers": {}}
    rec.update(case_size(name, b))
    copies = rec["copies"]
    # efir candidates, the best by estimate
    mods = {}
    for path in sorted((GEN / f"{name}_B{b}").glob(glob)):
        try:
            mods[path] = load(path)
        except Exception as e:  # noqa: BLE001
            rec["efir"].append({"candidate": path.stem, "error": f"import: {_error_text(e)}", "ok": False})
    paths = sorted(mods, key=lambda p: (mods[p].ESTIMATE["time_us"], p.name))[:max_candidates]
    per = {p: configs(mods[p], sweep, f"{p.parent.name}/{p.stem}") for p in paths}
    # tasks round-robin over the candidates (a budget cut takes each one's tail)
    entries, tasks = [], []
    for j in range(max((len(v) for v in per.values()), default=0)):
        for p in paths:
            if j < len(per[p]):
                mod, cfg = mods[p], per[p][j]
                entries.append(({"candidate": p.stem, "config": cfg, "kernels": mod.ESTIMATE["kernels"], "estimate_us": mod.ESTIMATE["time_us"]}, p))
                tasks.append({"path": str(p), "name": name, "b": b, "cfg": cfg, "seed": 10 + len(tasks)})
    torch.cuda.empty_cache()
    t0 = time.time()
    if pool is not None:
        results = pool.run(tasks, compile_timeout, compile_budget)
    else:
        results = [_check(t, {str(p): m for p, m in mods.items()}) for t in tasks]
    for (r, _), res in zip(entries, results):
        r.update({k: v for k, v in res.items() if k not in ("fatal",) and v not in (None, "")})
        r["ok"] = bool(res.get("ok"))
    nok = sum(r["ok"] for r, _ in entries)
    kinds = collections.Counter(
        "infeasible" if r.get("infeasible") else "timeout" if r.get("timeout") else "crashed" if r.get("crashed") else "skipped" if r.get("skipped") else "wrong" if r.get("rel_l2") is not None else "error"
        for r, _ in entries if not r["ok"]
    )
    log(f"  compile: {len(tasks)} configs of {len(paths)} candidates in {time.time() - t0:.0f} s, {nok} ok" + (" (" + ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) + ")" if kinds else ""))
    # quick times of every correct schedule
    t0 = time.time()
    qin = [make_inputs(name, b, 100 + i) for i in range(copies)]
    probes = [r["probe_us"] for r, _ in entries if r["ok"] and r.get("probe_us")]
    cut = max(10 * min(probes), 20000.0) if probes else float("inf")
    nskip = 0
    for r, p in entries:
        if not r["ok"]:
            continue
        if r.get("probe_us", 0) > cut:
            r["quick_skipped"] = f"probe {r['probe_us']:.0f} us > {cut:.0f} us"
            nskip += 1
            continue
        quick_time(r, mods[p], qin)
    # local search: neighbours of the best schedules so far, compiled,
    # checked and quick-timed like the sample
    for rnd in range(climb):
        ranked = sorted((e for e in entries if e[0].get("ok") and "quick_us" in e[0]), key=lambda e: e[0]["quick_us"])
        seen = {(p, tuple(sorted(r["config"].items()))) for r, p in entries}
        fresh = []
        for r, p in ranked[:3]:
            for cfg in neighbours(r["config"], mods[p].CONFIG_SPACE):
                key = (p, tuple(sorted(cfg.items())))
                if key in seen or len(fresh) >= climb_width:
                    continue
                seen.add(key)
                fresh.append(({"candidate": p.stem, "config": cfg, "kernels": mods[p].ESTIMATE["kernels"], "estimate_us": mods[p].ESTIMATE["time_us"], "climb": rnd + 1}, p))
        if not fresh:
            break
        t1 = time.time()
        ftasks = [{"path": str(p), "name": name, "b": b, "cfg": r["config"], "seed": 10 + len(tasks) + i} for i, (r, p) in enumerate(fresh)]
        tasks += ftasks
        results = pool.run(ftasks, compile_timeout, compile_budget) if pool is not None else [_check(t, {str(p): m for p, m in mods.items()}) for t in ftasks]
        for (r, _), res in zip(fresh, results):
            r.update({k: v for k, v in res.items() if k not in ("fatal",) and v not in (None, "")})
            r["ok"] = bool(res.get("ok"))
        for r, p in fresh:
            if r["ok"]:
                quick_time(r, mods[p], qin)
        entries += fresh
        best = min((r["quick_us"] for r, _ in entries if r.get("ok") and "quick_us" in r), default=float("nan"))
        log(f"  climb {rnd + 1}: {len(fresh)} neighbours in {time.time() - t1:.0f} s, {sum(r['ok'] for r, _ in fresh)} ok; best quick {best:.1f} us")
    del qin
    quick = sorted((e for e in entries if e[0].get("ok") and "quick_us" in e[0]), key=lambda e: e[0]["quick_us"])
    if quick:
        q, qp = quick[0]
        log(f"  quick: {len(quick)} timed in {time.time() - t0:.0f} s ({nskip} hopeless skipped); best {q['candidate']} [{schedule(q['config'], mods[qp].CONFIG_SPACE)}] {q['quick_us']:.1f} us")
    else:
        log(f"  quick: none correct ({time.time() - t0:.0f} s)")
    # re-check and re-time the best few properly
    t0 = time.time()
    done = []
    for i, (r, p) in enumerate(quick):
        if len(done) >= retime:
            break
        mod, cfg = mods[p], r["config"]
        try:
            inputs = make_inputs(name, b, 5000 + i)
            ref = reference(name, inputs)
            out = mod.run(*inputs, config=cfg)
            torch.cuda.synchronize()
            err = rel_l2(out, ref)
            del inputs, ref, out
            r["rel_l2_recheck"] = err
            r["rel_l2"] = max(r.get("rel_l2") or 0.0, err)
            if err > TOL:
                r["ok"] = False
                r["error"] = f"main re-check: rel_l2 {err:.3g} > {TOL}"
                continue
            r["time_us"] = timed(lambda *a, m=mod, c=cfg: m.run(*a, config=c), name, b, copies)
            done.append((r, p))
        except Exception as e:  # noqa: BLE001
            r["ok"] = False
            r["error"] = "main: " + _error_text(e)
    log(f"  re-timed {len(done)} in {time.time() - t0:.0f} s: " + ", ".join(f"{r['candidate']} [{schedule(r['config'], mods[p].CONFIG_SPACE)}] {r['time_us']:.1f} us (quick {r['quick_us']:.1f})" for r, p in done))
    rec["efir"] += [r for r, _ in entries]
    if done:
        r, p = min(done, key=lambda e: e[0]["time_us"])
        rec["best"] = {"candidate": r["candidate"], "config": r["config"], "time_us": r["time_us"], "kernels": r["kernels"], "schedule": schedule(r["config"], mods[p].CONFIG_SPACE)}
    rec["peers"] = time_peers(name, b, compile_mode, copies, log)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--md", default="", help="also write a Markdown report here")
    ap.add_argument("--workloads", default=",".join(FUNCS))
    ap.add_argument("--batches", default="1,8,16")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--candidates", type=int, default=4, help="best candidates (by estimate) per case")
    ap.add_argument("--sweep", type=int, default=None, help="schedules per candidate (default 24): the default, structured points, random samples")
    ap.add_argument("--configs", type=int, default=None, help="alias of --sweep (--sweep wins)")
    ap.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 3) - 2)), help="processes that compile and check schedules")
    ap.add_argument("--compile-timeout", type=float, default=90.0, help="seconds per schedule's compile and check")
    ap.add_argument("--compile-budget", type=float, default=100.0, help="seconds per case after which no further schedules start compiling (0: no limit)")
    ap.add_argument("--retime", type=int, default=4, help="best schedules per case re-timed properly")
    ap.add_argument("--climb", type=int, default=3, help="rounds of local search around the best schedules (neighbours: one block doubled or halved, warps, stages)")
    ap.add_argument("--climb-width", type=int, default=16, help="schedules tried per round of local search")
    ap.add_argument("--cases", default="", help="only these name:B pairs, comma separated")
    ap.add_argument("--glob", default="*.py", help="candidate modules to run")
    ap.add_argument("--warm", type=int, default=0, help="torch.compile the peers in N processes first")
    ap.add_argument("--warm-only", action="store_true", help="only fill Inductor's cache")
    args = ap.parse_args()
    sweep = args.sweep if args.sweep is not None else args.configs if args.configs is not None else 24
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def log(s):
        print(s, flush=True)

    res = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "compile_mode": args.compile_mode,
        "date": time.strftime("%Y-%m-%d"),
        "sweep": sweep,
        "candidates": args.candidates,
        "workers": max(1, args.workers),
        "retime": args.retime,
        "results": [],
    }
    cases = [(n, int(b)) for b in args.batches.split(",") for n in args.workloads.split(",")]
    if args.cases:
        cases = [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases.split(",")]
    if args.warm and args.compile_mode != "none":
        warm_compile(cases, args.compile_mode, args.warm, log)
        if args.warm_only:
            return
    # The workers import torch while the ceilings are measured (they touch
    # the GPU only with their first task).
    pool = CheckPool(max(1, args.workers), log)
    try:
        bw, mm, seen = ceilings()
        res["copy_bandwidth_Bps"] = bw
        res["fp16_matmul_flops"] = mm
        res["ceilings"] = seen
        log(f"copy bandwidth {bw / 1e12:.2f} TB/s, fp16 matmul {mm / 1e12:.0f} TFLOP/s; {sweep} schedules x {args.candidates} candidates per case, {pool.n} workers")
        log("  " + ", ".join(f"{k} {v / 1e12:.2f}T" for k, v in seen.items()))
        for name, b in cases:
            t0 = time.time()
            log(f"{name} B={b}")
            try:
                rec = bench_one(name, b, args.compile_mode, log, args.candidates, sweep, args.glob, pool, args.compile_timeout, args.compile_budget, args.retime, args.climb, args.climb_width)
            except Exception as e:  # noqa: BLE001
                rec = {"workload": name, "B": b, "error": str(e)[-600:]}
                log(f"  FAILED: {_error_text(e)[:300]}")
            if "bytes" in rec:
                rec["floor_us"] = max(rec["bytes"] / bw, rec["flops"] / mm) * 1e6
            rec["wall_s"] = round(time.time() - t0, 1)
            res["results"].append(rec)
            pathlib.Path(args.out).write_text(json.dumps(res, indent=1))
            if args.md:
                pathlib.Path(args.md).write_text(report(res) + "\n")
            log(f"  case done in {rec['wall_s']:.0f} s")
    finally:
        pool.close()
    log(table(res))
    log(summary(res))


# ------------------------------------------------------------------- reports
if __name__ == "__main__":
    main()
