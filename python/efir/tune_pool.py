"""Compiling schedules in worker processes, for the tuner (`efir.tune`).

Each worker is a plain `python -c` subprocess that loads this file alone
(its imports are the standard library's) and runs candidate modules under
the schedules it is sent, so that Triton compiles them into its on-disk
cache and the timed process finds them compiled. Workers never import the
caller's `__main__` (multiprocessing's spawn would re-run a script that
calls `efir.compile` at top level) nor the efir package.
"""

import importlib.util
import json
import os
import pathlib
import time


def _load(path, tag):
    spec = importlib.util.spec_from_file_location(f"efir_tune_{tag}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FATAL = ("illegal memory access", "illegal instruction", "unspecified launch failure", "misaligned address", "device-side assert")
INFEASIBLE = ("outofresources", "out of resource", "shared memory", "too many resources", "registers")


LOCK_ENV = "EFIR_TUNE_GPU_LOCK"


class gpu_lock:
    """An exclusive lock on the GPU between the tuner and its workers (flock
    on a file; released if its holder dies): the tuner holds it while it
    runs and times a schedule, a worker while it runs one."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        import fcntl

        if self.path:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None
        return False


class _Warm:
    """While a module is run only to compile it, `kernel[grid](*args, **kw)`
    compiles (Triton's `warmup`: into the in-memory and on-disk caches)
    without launching anything; with `launch` set, it launches. Installed
    on Triton's kernel class (`install`, once per worker process), not on
    the module's names: a launch group's kernel calls its members by their
    names, which must stay Triton's kernels."""

    launch = False

    @staticmethod
    def install():
        from triton.runtime.jit import KernelInterface

        if getattr(KernelInterface, "_efir_warm", False):
            return
        real = KernelInterface.__getitem__

        def getitem(self, grid):
            if _Warm.launch or not hasattr(self, "warmup"):
                return real(self, grid)
            return lambda *args, **kw: self.warmup(*args, grid=grid, **kw)

        KernelInterface.__getitem__ = getitem
        KernelInterface._efir_warm = True


# The worker's probe: a first launched run over PROBE_AGAIN_US is timed once
# more (its kernels' binaries were loading; a worker's first launch of all
# measured 175 ms once); one over PROBE_ONCE_US is slow whatever the
# loading cost.
PROBE_AGAIN_US = 200.0
PROBE_ONCE_US = 1_000_000.0


def _timed_run(mod, xs, cfg):
    """(outputs, microseconds) of one run of `mod` by CUDA events."""
    import torch

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    out = mod.run(*xs, config=cfg)
    e1.record()
    torch.cuda.synchronize()
    return out, 1000.0 * e0.elapsed_time(e1)


def _probe(timed_run):
    """(outputs, microseconds) of the worker's probe: `timed_run()` once, and
    once more where the first took over PROBE_AGAIN_US but under
    PROBE_ONCE_US: a kernel's first launch in a process loads its binary
    (about half a millisecond a kernel), which made every program of three
    or more kernels look a millisecond slow and the tuner drop it."""
    out, t = timed_run()
    if PROBE_AGAIN_US < t < PROBE_ONCE_US:
        out = None
        out, t = timed_run()
    return out, t


def _compile_job(path, cfg, mods):
    """Compile module `path` under schedule `cfg` (in a worker process) into
    Triton's on-disk cache, then run it once on random inputs to catch what
    only a launch shows (shared memory past the limit, a fault that breaks
    the CUDA context). On a GPU the compiling launches nothing, and the run
    holds the GPU lock (`gpu_lock`, its file named by $EFIR_TUNE_GPU_LOCK),
    so that a worker never runs while the tuner times; its time by CUDA
    events comes back as "probe_us". Under TRITON_INTERPRET=1 the module
    just runs. {"ok", "probe_us"} or {"ok": False, "error", "kind"} where
    kind is "infeasible" (does not compile or fit), "fatal" (broke the CUDA
    context), "oom" (out of GPU memory: the GPU is shared, so not a
    verdict) or "error"."""
    import torch

    xs = out = None
    try:
        dev = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
        if path not in mods:
            mod = _load(path, f"pre_{os.getpid()}_{len(mods)}")
            if dev == "cuda":
                _Warm.install()
            mods[path] = mod
        mod = mods[path]
        res = {"ok": True}
        # The inputs' shapes: INPUTS', or, for a module whose INPUTS has
        # symbolic extents (a family's), the TUNE_SHAPES its tuner wrote.
        shapes = getattr(mod, "TUNE_SHAPES", None) or [shape for _, shape, _ in mod.INPUTS]
        if dev == "cuda":
            _Warm.launch = False
            mod.run(*[torch.empty(shape, device=dev, dtype=dt) for (_, _, dt), shape in zip(mod.INPUTS, shapes)], config=cfg)
        with gpu_lock(os.environ.get(LOCK_ENV) if dev == "cuda" else None):
            xs = []
            for (_, _, dt), shape in zip(mod.INPUTS, shapes):
                if dt.is_floating_point:
                    xs.append(torch.randn(shape, device=dev).to(dt))
                else:
                    xs.append(torch.zeros(shape, device=dev, dtype=dt))
            if dev == "cuda":
                _Warm.launch = True
                torch.cuda.synchronize()
                out, res["probe_us"] = _probe(lambda: _timed_run(mod, xs, cfg))
            else:
                out = mod.run(*xs, config=cfg)
        return res
    except Exception as e:  # noqa: BLE001 (reported to the parent)
        text = f"{type(e).__name__}: {str(e).strip()[:400]}"
        low = text.lower()
        if isinstance(e, torch.cuda.OutOfMemoryError):
            kind = "oom"
        elif any(f in low for f in FATAL):
            kind = "fatal"
        elif type(e).__name__ in ("OutOfResources", "CompilationError", "CompileTimeAssertionFailure") or any(f in low.replace(" ", "") for f in (x.replace(" ", "") for x in INFEASIBLE)):
            kind = "infeasible"
        else:
            kind = "error"
        return {"ok": False, "error": text, "kind": kind}
    finally:
        xs = out = None
        try:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass


def _worker_main():
    """A compile worker (`CompilePool`): reads {"path", "cfg"} JSON lines on
    stdin, answers each with `_compile_job`'s result on its stdout (the
    real one; anything printed goes to stderr). Exits at end of input, and
    after a fatal CUDA error."""
    import sys

    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    mods = {}
    try:  # the slow imports, before saying ready
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError:
        pass
    proto.write(json.dumps({"ready": os.getpid()}) + "\n")
    proto.flush()
    for line in sys.stdin:
        job = json.loads(line)
        res = _compile_job(job["path"], job["cfg"], mods)
        res["id"] = job["id"]
        proto.write(json.dumps(res) + "\n")
        proto.flush()
        if res.get("kind") == "fatal":
            os._exit(3)


class CompilePool:
    """Worker processes that compile schedules, so that the timed process
    finds them in Triton's on-disk cache. The workers are plain
    `python -c` subprocesses that import only efir (never the caller's
    __main__, which multiprocessing's spawn would re-run: a script calling
    `efir.compile` at top level), started on first use and kept for the
    pool's life; a worker past a job's deadline is killed and replaced."""

    def __init__(self, workers=None):
        import tempfile

        self.n = workers or max(1, min(8, (os.cpu_count() or 2) - 1))
        self.procs = []
        self.next_id = 0
        fd, self.lock_path = tempfile.mkstemp(prefix="efir-tune-gpu-", suffix=".lock")
        os.close(fd)

    def gpu_lock(self):
        """The GPU to oneself: no worker runs a kernel meanwhile (they still
        compile)."""
        return gpu_lock(self.lock_path)

    def _spawn(self):
        import subprocess
        import sys

        # this file alone (its imports are the standard library's), not the
        # efir package, whose import pulls in torch._dynamo
        me = str(pathlib.Path(__file__).resolve())
        code = f"import importlib.util as u; s = u.spec_from_file_location('efir_tune_pool_worker', {me!r}); m = u.module_from_spec(s); s.loader.exec_module(m); m._worker_main()"
        env = {**os.environ, LOCK_ENV: self.lock_path}
        p = subprocess.Popen([sys.executable, "-u", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, env=env)
        return {"proc": p, "job": None, "t0": 0.0, "ready": False, "buf": b""}

    def start(self, timeout=300.0):
        """Start all the workers now and wait until they have imported
        torch and Triton (at most `timeout` seconds); how many are ready."""
        import selectors

        while len(self.procs) < self.n:
            self.procs.append(self._spawn())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(w["ready"] for w in self.procs):
            sel = selectors.DefaultSelector()
            for w in self.procs:
                if not w["ready"] and w["proc"].poll() is None:
                    sel.register(w["proc"].stdout, selectors.EVENT_READ, w)
            if not sel.get_map():
                break
            for key, _ in sel.select(timeout=1.0):
                self._read(key.data, {}, {})
            sel.close()
        return sum(w["ready"] for w in self.procs)

    def _read(self, w, ids, results):
        """Read what worker w wrote: its ready line, its job's result (into
        results[job id])."""
        chunk = os.read(w["proc"].stdout.fileno(), 1 << 16)
        if not chunk:  # end of output: the worker died
            if w["job"] in ids:
                results[w["job"]] = {"ok": False, "error": f"worker died (exit {w['proc'].wait()})", "kind": "fatal"}
            w["job"] = None
            return
        w["buf"] += chunk
        *lines, w["buf"] = w["buf"].split(b"\n")
        for line in lines:
            msg = json.loads(line)
            if "ready" in msg:
                w["ready"] = True
            elif msg.get("id") == w["job"] and w["job"] in ids:
                results[msg["id"]] = msg
                w["job"] = None

    def _kill(self, w):
        try:
            w["proc"].kill()
            w["proc"].wait(10)
        except Exception:  # noqa: BLE001
            pass

    def run(self, jobs, timeout=300.0):
        """Compile `jobs` ([(module path, cfg)]); returns one result per job
        (see `_compile_job`), None for a job not done within `timeout`
        seconds of this call."""
        results = [None] * len(jobs)
        for j, r in self.run_iter(jobs, timeout):
            results[j] = r
        return results

    def run_iter(self, jobs, timeout=300.0):
        """Compile `jobs`, yielding (index, result) as each one is done, for
        at most `timeout` seconds. Closing the generator early, or its
        deadline, kills the workers still compiling (they are started again
        by the next call)."""
        import selectors

        if not jobs:
            return
        self.procs = [w for w in self.procs if w["proc"].poll() is None]
        while len(self.procs) < min(self.n, len(jobs)):
            self.procs.append(self._spawn())
        ids = {}
        queue = list(range(len(jobs)))
        queue.reverse()
        deadline = time.monotonic() + timeout
        try:
            while True:
                now = time.monotonic()
                for i, w in enumerate(self.procs):
                    if w["proc"].poll() is not None and w["job"] is None:  # died idle: replace it
                        self.procs[i] = w = self._spawn()
                    if w["job"] is None and queue:
                        j = queue.pop()
                        self.next_id += 1
                        ids[self.next_id] = j
                        try:
                            w["proc"].stdin.write((json.dumps({"id": self.next_id, "path": str(jobs[j][0]), "cfg": dict(jobs[j][1])}) + "\n").encode())
                            w["job"], w["t0"] = self.next_id, now
                        except OSError:
                            queue.append(j)
                busy = [w for w in self.procs if w["job"] is not None]
                if not busy or now >= deadline:
                    break
                sel = selectors.DefaultSelector()
                for w in busy:
                    sel.register(w["proc"].stdout, selectors.EVENT_READ, w)
                ready = sel.select(timeout=min(1.0, max(0.0, deadline - now)))
                sel.close()
                for key, _ in ready:
                    out = {}
                    self._read(key.data, ids, out)
                    for jid, r in out.items():
                        yield ids[jid], r
        finally:
            # jobs still running (past the deadline, or the caller stopped):
            # their workers are killed
            for w in self.procs:
                if w["job"] is not None:
                    self._kill(w)
                    w["job"] = None
            self.procs = [w for w in self.procs if w["proc"].poll() is None]

    def close(self):
        for w in self.procs:
            try:
                w["proc"].stdin.close()
            except OSError:
                pass
        for w in self.procs:
            try:
                w["proc"].wait(10)
            except Exception:  # noqa: BLE001
                self._kill(w)
        self.procs = []
        try:
            os.unlink(self.lock_path)
        except OSError:
            pass


def precompile(jobs, workers=None, timeout=300.0):
    """Compile the schedules `jobs` ([(module path, cfg)]) in worker
    processes (`CompilePool`); returns how many ran."""
    pool = CompilePool(workers)
    try:
        return sum(1 for r in pool.run(jobs, timeout) if r and r.get("ok"))
    finally:
        pool.close()
