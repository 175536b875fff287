"""Schedule tuning by measurement, and its persistent cache.

`python -m efir tune CANDS.efir -o TUNED.efir [--budget S] [--top K]`
shortlists the K candidates of a file by efir's static estimate, explores
each one's schedule space (its default, random samples of CONFIG_SPACE,
then one-step neighbours of the best schedules found; for a candidate of
several kernels, one group of parameters at a time: those shared between
kernels, such as the blocks that shape a buffer of partial results, then
each kernel's own, timing the whole program), spends measurement
by successive halving across candidates, checks every timed schedule
against a reference (relative L2 <= 0.01), and writes the chosen candidate
with its schedule recorded as a `schedule` attribute (which
`efir-translate --to-triton` emits as DEFAULT_CONFIG) beside the functions
it uses. Results are remembered in a SQLite file (`Cache`), keyed by the
candidates' text, the GPU, and the Triton, torch and efir versions: a
second tune of the same file on the same GPU measures nothing.

The schedule space (the samples and one-step moves of a CONFIG_SPACE, and
which parameters belong to which kernel) is `efir.tune_space`, re-exported
here. The search (`search`) only sees a `measure(candidate, config)` function
returning microseconds, or None for a schedule that does not compile, does
not fit, or computes a wrong result, so it is tested with fake timers.
"""

import contextlib
import hashlib
import json
import math
import os
import pathlib
import random
import re
import sqlite3
import time

# The schedule space (its own module; re-exported here, where tests and
# bench/gpu import it from).
from .tune_space import (  # noqa: F401
    MAX_BLOCK,
    STAGES,
    WARPS,
    WHOLE_ROW,
    _key,
    _stages_key,
    _warps_key,
    groups,
    neighbours,
    samples,
    split_k_start,
    structure,
    whole_rows,
)

TOL = 1e-2


# ------------------------------------------------------------------ the cache
def cache_dir():
    """EFIR_CACHE_DIR, else $XDG_CACHE_HOME/efir, else ~/.cache/efir."""
    d = os.environ.get("EFIR_CACHE_DIR")
    if d:
        return pathlib.Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "efir"


class Cache:
    """Tuning results in SQLite (`tune.sqlite` under `cache_dir()`), safe
    for concurrent processes (WAL journal, a busy timeout, one transaction
    per write)."""

    def __init__(self, path=None):
        self.path = pathlib.Path(path) if path else cache_dir() / "tune.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        self.db.execute("PRAGMA busy_timeout = 60000")
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS tuned (key TEXT PRIMARY KEY, candidate TEXT NOT NULL, "
            "schedule TEXT NOT NULL, time_us REAL, meta TEXT NOT NULL, created REAL NOT NULL)"
        )

    def get(self, key):
        row = self.db.execute("SELECT candidate, schedule, time_us, meta, created FROM tuned WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return {"candidate": row[0], "schedule": json.loads(row[1]), "time_us": row[2], "meta": json.loads(row[3]), "created": row[4]}

    def put(self, key, candidate, schedule, time_us, meta):
        self.db.execute(
            "INSERT OR REPLACE INTO tuned (key, candidate, schedule, time_us, meta, created) VALUES (?, ?, ?, ?, ?, ?)",
            (key, candidate, json.dumps(schedule, sort_keys=True), time_us, json.dumps(meta, sort_keys=True), time.time()),
        )

    def entries(self):
        rows = self.db.execute("SELECT key, candidate, schedule, time_us, meta, created FROM tuned ORDER BY created").fetchall()
        return [{"key": k, "candidate": c, "schedule": json.loads(s), "time_us": t, "meta": json.loads(m), "created": cr} for k, c, s, t, m, cr in rows]

    def clear(self):
        n = self.db.execute("SELECT COUNT(*) FROM tuned").fetchone()[0]
        self.db.execute("DELETE FROM tuned")
        return n

    def close(self):
        self.db.close()


def environment():
    """What a tuned time depends on besides the program: the device and the
    versions of Triton, torch and efir."""
    env = {"device": "cpu", "triton": None, "torch": None, "efir": None}
    try:
        import torch

        env["torch"] = torch.__version__
        if torch.cuda.is_available():
            env["device"] = torch.cuda.get_device_name()
    except ImportError:
        pass
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        env["efir"] = version("efir")
    except Exception:  # noqa: BLE001 (not installed as a distribution)
        env["efir"] = "source"
    if os.environ.get("TRITON_INTERPRET") == "1":
        env["device"] = "triton-interpreter"
    return env


def cache_key(text, env, top):
    """The key of a tuning: the candidates' text, the shortlist size and the
    environment."""
    blob = json.dumps({"text": text, "env": env, "top": top}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


# ----------------------------------------------------------------- the search
def search(cands, measure, budget_s=60.0, first=8, width=8, seed=0, clock=time.monotonic, progress=None, prepare=None, halve=True, starts=None):
    """Successive halving over candidates with a local search per survivor.

    cands: [(name, default_config, config_space)] or [(name, default,
    space, groups, inert)] (see `groups`), best static estimate first.
    measure(name, cfg) -> microseconds, or None (infeasible or wrong).
    Round 0 measures each candidate's default and `first - 1` random
    schedules (the first candidate's default always, even past the budget:
    what efir runs untuned; the others' within it); every later round
    keeps the better half of the candidates (by their best time) and
    measures up to `width` unmeasured neighbours of each survivor's two best
    schedules. For a candidate of several kernels the neighbours move one
    group of parameters at a time, the others fixed at the best schedule's
    values: first those shared between kernels (buffer-shaping blocks,
    num_warps, num_stages), then each kernel's own, timing the whole
    program; a group stays in focus while it improves, and the candidate is
    done when a whole cycle of groups found nothing faster. The search
    stops when the budget is spent, or when every survivor is done (one is
    left, or none has an unmeasured neighbour). `prepare([(name, cfg)])`,
    if given, is called with each round's schedules before any of them is
    measured (to compile them in parallel); if it returns an iterable of
    indices into the round, those schedules are measured in that order (as
    each is compiled) and the others not. Returns {"name", "config",
    "time_us", "measured", "rounds", "trace"} (name None when nothing
    measured was correct). `halve=False` keeps every candidate (a wide
    sweep, for comparison). `starts` ({name: [schedule]}) adds structured
    schedules to a candidate's round 0, right after its default.
    """
    rng = random.Random(seed)
    t0 = clock()
    times = {c[0]: {} for c in cands}  # name -> {cfg key: (cfg, time or None)}
    spaces = {c[0]: c[2] for c in cands}
    parts = {}  # name -> [groups of keys]
    for c in cands:
        gs = [list(g) for g in (c[3] if len(c) > 3 and c[3] else [list(c[2])]) if g]
        parts[c[0]] = gs or [list(c[2])]
    inert = {c[0]: set(c[4]) if len(c) > 4 and c[4] else set() for c in cands}
    focus = {name: 0 for name in times}
    stale = {name: 0 for name in times}
    trace = []

    def run(name, cfg):
        k = _key(cfg)
        if k in times[name]:
            return times[name][k][1]
        t = measure(name, cfg)
        times[name][k] = (dict(cfg), t)
        trace.append((name, dict(cfg), t))
        if progress:
            progress(name, cfg, t, best()[2])
        return t

    def best_of(name):
        ok = [(t, c) for c, t in times[name].values() if t is not None]
        return min(ok, key=lambda x: x[0]) if ok else (math.inf, None)

    def best():
        b = (None, None, math.inf)
        for name in times:
            t, c = best_of(name)
            if t < b[2]:
                b = (name, c, t)
        return b

    def spent():
        return clock() - t0 >= budget_s

    def run_batch(batch, must=0):
        # Each round's schedules are known before any is timed: `prepare`
        # (compiling them in parallel) sees them all first; where it
        # returns an iterable of batch indices (each yielded when that
        # schedule is compiled), they are measured in that order, and those
        # it never yields are left out. The first `must` are measured even
        # past the budget (or if never yielded).
        order = prepare(batch) if prepare and batch else None
        done, seen = 0, set()
        try:
            for i in (range(len(batch)) if order is None else order):
                if spent():
                    break
                seen.add(i)
                run(*batch[i])
                done += 1
        finally:
            if hasattr(order, "close"):
                order.close()
        for i in range(min(must, len(batch))):
            if i not in seen:
                run(*batch[i])
                done += 1
        return done

    def moves(name):
        """Unmeasured neighbours of the two best schedules in the focused
        group, moving focus past groups that have none."""
        ranked = sorted(((t, c) for c, t in times[name].values() if t is not None), key=lambda x: x[0])[:2]
        gs = parts[name]
        for _ in range(len(gs)):
            picked = {}
            for _, c in ranked:
                for nb in neighbours(c, spaces[name], set(gs[focus[name]])):
                    if len(picked) < width and _key(nb) not in times[name]:
                        picked.setdefault(_key(nb), nb)
            if picked:
                return list(picked.values())
            focus[name] = (focus[name] + 1) % len(gs)
            stale[name] += 1
        return []

    alive = [c[0] for c in cands]
    round0 = []
    for name, default, space, *_ in cands:
        cfgs = samples(default, space, first, rng, inert[name])
        have = {_key(x) for x in cfgs}
        extra = [c for c in (starts or {}).get(name, []) if c and _key(c) not in have]
        round0.append([(name, cfg) for cfg in cfgs[:1] + extra + cfgs[1:]][: max(first, 1 + len(extra))])
    batch0 = [b[0] for b in round0] + [x for b in round0 for x in b[1:]]
    run_batch(batch0, must=1)
    rounds = 1
    while not spent() and alive:
        alive.sort(key=lambda n: best_of(n)[0])
        if len(alive) > 1 and halve:
            alive = alive[: max(1, (len(alive) + 1) // 2)]
        active = [n for n in alive if stale[n] < len(parts[n])]
        if not active:
            break
        before = {n: best_of(n)[0] for n in active}
        batch = []
        for name in active:
            batch.extend((name, nb) for nb in moves(name))
        if not batch:
            break
        run_batch(batch)
        rounds += 1
        for name in active:
            if best_of(name)[0] < before[name]:
                stale[name] = 0
            else:
                stale[name] += 1
                focus[name] = (focus[name] + 1) % len(parts[name])
        if len(alive) == 1 and stale[alive[0]] >= len(parts[alive[0]]):
            break
    name, cfg, t = best()
    return {"name": name, "config": cfg, "time_us": None if name is None else t, "measured": len(trace), "rounds": rounds, "trace": trace}


# ------------------------------------------------------------------- timing
L2_BYTES = 60 * 2**20  # the H200's L2 (KERNELS.md)


def rotation(nbytes):
    """How many input copies a timing rotates over: enough that they cover
    three times the L2 (so that no input is read from cache), at most 8."""
    return max(1, min(8, math.ceil(3 * L2_BYTES / max(int(nbytes), 1))))


SLOW = 10.0  # a schedule this many times slower than the best so far is not timed closely


def event_us(fn):
    """Microseconds of one call of fn, by CUDA events (launch overhead
    included: a coarse probe)."""
    import torch

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    fn()
    e1.record()
    torch.cuda.synchronize()
    return 1000.0 * e0.elapsed_time(e1)


def graph_time_us(run, inputs, rep=20):
    """Median time per call of `run(*inputs)` with CUDA-graph replays
    (`triton.testing.do_bench_cudagraph`: no launch overhead from Python),
    rotating over copies of the inputs where one set would sit in L2."""
    import torch
    from triton.testing import do_bench_cudagraph

    nbytes = sum(t.numel() * t.element_size() for t in inputs)
    sets = [list(inputs)] + [[t.clone() for t in inputs] for _ in range(rotation(nbytes) - 1)]

    def many():
        for s in sets:
            run(*s)

    many()
    torch.cuda.synchronize()
    try:
        ms = do_bench_cudagraph(many, rep=rep, return_mode="median")
    except TypeError:  # Triton without return_mode
        ms = do_bench_cudagraph(many, rep=rep)
    return 1000.0 * ms / len(sets)


# ------------------------------------------------------ parallel compiling
from .tune_pool import CompilePool, precompile  # noqa: E402  (re-exported)

# ------------------------------------------------------------ files and text
_FUNC = re.compile(r"^func @([A-Za-z_][A-Za-z0-9_$.]*)\(", re.M)


def functions(text):
    """The top-level functions of printed .efir text: [(name, text)]."""
    starts = [(m.start(), m.group(1)) for m in _FUNC.finditer(text)]
    out = []
    for i, (s, name) in enumerate(starts):
        e = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        body = text[s:e]
        end = body.rfind("\n}")
        out.append((name, body[: end + 2] + "\n" if end >= 0 else body))
    return out


def schedule_text(cfg):
    """A config as the `schedule` attribute's string (blocks by name, then
    num_warps and num_stages, then any other parameters by name)."""
    head = sorted(k for k in cfg if k.startswith("BLOCK_")) + [k for k in ("num_warps", "num_stages") if k in cfg]
    order = head + sorted(k for k in cfg if k not in head)
    return ",".join(f"{k}={int(cfg[k])}" for k in order)


def with_schedule(func_text, cfg):
    """A printed function with its `schedule` attribute set to cfg."""
    head, sep, rest = func_text.partition("{\n")
    sched = f'schedule = "{schedule_text(cfg)}"'
    head = re.sub(r',?\s*schedule = "[^"]*"', "", head)
    if " attributes {" in head:
        head = head.replace(" attributes {", " attributes {" + sched + ", ", 1)
        head = head.replace(", }", "}")
    else:
        head = head.rstrip() + " attributes {" + sched + "} "
    return head + sep + rest


def tuned_module(text, name, cfg):
    """The tuned file: the chosen candidate with its schedule, and every
    function that is not a candidate (reducer functions it may use)."""
    out = []
    for fname, ftext in functions(text):
        first = ftext.split("{\n", 1)[0]
        if fname == name:
            out.append(with_schedule(ftext, cfg))
        elif "source = @" not in first:
            out.append(ftext)
    return "\n".join(out)


# ------------------------------------------------------------- tuning a file
class TuneError(Exception):
    """Tuning could not run or found nothing correct; the message says why."""


def _bin(name):
    from .compile import CompileError, _bin as find

    try:
        return find(name)
    except CompileError as e:
        raise TuneError(str(e)) from None


def _sh(*args):
    import subprocess

    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise TuneError(f"`{pathlib.Path(args[0]).name}` failed ({r.returncode}):\n{r.stderr.strip()}")
    return r.stdout


MAX_INPUT_BYTES = 256 << 20  # as the efir tools (crates/driver: MAX_INPUT_BYTES)


def read_input(path):
    """The UTF-8 text of file `path`, at most MAX_INPUT_BYTES (an endless
    device such as /dev/zero is refused, not read into memory)."""
    with open(path, "rb") as f:
        data = f.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise TuneError(f"`{path}` is larger than {MAX_INPUT_BYTES >> 20} MiB, the most an efir tool reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TuneError(f"`{path}` is not UTF-8 text (invalid byte at offset {e.start})") from None


def canonical(text, filename="<string>"):
    """The file's text as efir prints it (so that equal programs have equal
    keys)."""
    from .compile import native

    n = native()
    if n is not None:
        return n.parse(text, filename=filename)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="efir-tune-") as d:
        p = pathlib.Path(d) / "in.efir"
        p.write_text(text)
        return _sh(_bin("efir-opt"), str(p))


def shortlist(text, top):
    """The `top` candidates by static estimate: [(name, module source)]."""
    from .compile import native

    n = native()
    if n is not None:
        return n.to_triton(text, top=top)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="efir-tune-") as d:
        p = pathlib.Path(d) / "cands.efir"
        p.write_text(text)
        out = pathlib.Path(d) / "py"
        _sh(_bin("efir-translate"), "--to-triton", str(p), "--top", str(top), "--output-dir", str(out))
        names = [name for name, _ in functions(text)]
        res = []
        for name in names:
            f = out / f"{re.sub(r'[^A-Za-z0-9]', '_', name)}.py"
            if f.exists():
                res.append((name, f.read_text()))
        return res


def _rel_l2(out, ref):
    import torch

    a, b = out.double().flatten(), ref.double().flatten()
    fin = torch.isfinite(b)
    if not bool(torch.equal(torch.isfinite(a), fin)):
        return math.inf
    a, b = a[fin], b[fin]
    den = float(torch.linalg.vector_norm(b))
    return float(torch.linalg.vector_norm(a - b)) / (den if den > 0 else 1.0)


def reference(text, name, work):
    """Run candidate `name` under efir's interpreter (`efir-run`) on seeded
    random inputs: the directory holding `in_<param>.npy` and `out<i>.npy`."""
    work = pathlib.Path(work)
    work.mkdir(parents=True, exist_ok=True)
    src = work / "cands.efir"
    src.write_text(text)
    _sh(_bin("efir-run"), str(src), "--func", name, "--output-dir", str(work), "--dump-inputs")
    return work


def _load(path, tag):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"efir_tune_{tag}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tune_modules(cands, inputs, expected, budget_s, timer=None, progress=None, seed=0, cuda=True, pool=None, tol=TOL, **search_args):
    """The search over loaded candidate modules: cands [(name, module path,
    module, module source)], best static estimate first. Every schedule is
    run on `inputs` and checked against `expected` (relative L2 <= tol)
    before it is timed, by `timer(name, mod, cfg, run)` where given (tests),
    else with CUDA graphs (`graph_time_us`; a schedule whose one run, timed
    by events, is over SLOW times the best so far and over 1 ms keeps that
    coarse time instead). On a GPU each round is first
    compiled in worker processes (`pool`, a `CompilePool`, else one made
    and closed here) and measured as it is done, holding the pool's GPU
    lock; a schedule a worker found infeasible or fatal, or whose worker
    run was hopelessly slow, is not run here. Returns `search`'s result with "failures" (why schedules
    were left out) and "seconds" (the time spent)."""
    import torch

    t_start = time.monotonic()
    failures = []
    skip = {}  # (name, cfg key) -> why: a worker found it infeasible or fatal
    fastest = [math.inf]
    probes = {}  # (name, cfg key) -> a worker's time of one run, microseconds
    loaded = {name: mod for name, _, mod, _ in cands}
    paths = {name: path for name, path, _, _ in cands}

    def run_checked(mod, cfg):
        res = mod.run(*inputs, config=cfg)
        res = res if isinstance(res, (tuple, list)) else (res,)
        if cuda:
            torch.cuda.synchronize()
        errs = [_rel_l2(r.detach().float().to(o.device), o.float()) for r, o in zip(res, expected)]
        return max(errs) if errs else math.inf

    def measure(name, cfg):
        probe = probes.get((name, _key(cfg)))
        if probe is not None and probe > SLOW * fastest[0] and probe > 1000.0:
            return probe  # the worker's one run: hopeless, not run here
        with pool.gpu_lock() if pool is not None and cuda else contextlib.nullcontext():
            return measure_here(name, cfg)

    def measure_here(name, cfg):
        mod = loaded[name]
        if (name, _key(cfg)) in skip:
            failures.append(f"@{name} {schedule_text(cfg)}: {skip[(name, _key(cfg))]}")
            return None
        try:
            err = run_checked(mod, cfg)
            if err > tol:
                failures.append(f"@{name} {schedule_text(cfg)}: relative L2 error {err:.3g} > {tol}")
                return None
            if timer is not None:
                return float(timer(name, mod, cfg, lambda: mod.run(*inputs, config=cfg)))
            if fastest[0] < math.inf:
                # one run timed with events first: a schedule SLOW times
                # slower than the best so far (a tile of one element can
                # take seconds) is not worth CUDA-graph replays
                t = event_us(lambda: mod.run(*inputs, config=cfg))
                if t > SLOW * fastest[0] and t > 1000.0:
                    return t
            t = graph_time_us(lambda *xs: mod.run(*xs, config=cfg), inputs)
            fastest[0] = min(fastest[0], t)
            return t
        except Exception as e:  # noqa: BLE001 (does not compile, does not fit: infeasible)
            failures.append(f"@{name} {schedule_text(cfg)}: {type(e).__name__}: {str(e).strip()[:300]}")
            return None

    specs = []
    for name, _, mod, src in cands:
        gs, inert = groups(src, mod.CONFIG_SPACE)
        specs.append((name, dict(mod.DEFAULT_CONFIG), mod.CONFIG_SPACE, gs, inert))
    own = pool is None and cuda
    if own:
        pool = CompilePool()

    def prepare(batch):
        # compile in the workers, within what is left of the budget; each
        # schedule is measured as soon as it is compiled (a worker runs a
        # schedule only under the GPU lock, which measuring holds)
        left = budget_s - (time.monotonic() - t_start)
        it = pool.run_iter([(paths[n], c) for n, c in batch], timeout=max(10.0, left))
        try:
            for j, r in it:
                n, c = batch[j]
                if r.get("kind") in ("infeasible", "fatal"):
                    skip[(n, _key(c))] = f"{r['kind']} in a compile worker: {r.get('error', '')}"
                if r.get("probe_us") is not None:
                    probes[(n, _key(c))] = r["probe_us"]
                yield j
        finally:
            it.close()  # stops the workers still compiling this round

    try:
        starts = {name: [split_k_start(dict(mod.DEFAULT_CONFIG), mod.CONFIG_SPACE, src)] for name, _, mod, src in cands}
        search_args.setdefault("starts", starts)
        res = search(specs, measure, budget_s=budget_s, seed=seed, progress=progress, prepare=prepare if pool is not None else None, **search_args)
    finally:
        if own:
            pool.close()
    confirm(res, specs[0][0], specs[0][1], loaded, inputs, timer, pool if cuda else None)
    res["failures"] = failures
    res["seconds"] = time.monotonic() - t_start
    return res


# Schedules re-timed side by side at the end of a search (`confirm`).
CONFIRM = 3


def confirm(res, first, default, loaded, inputs, timer=None, pool=None):
    """Re-time the search's CONFIRM fastest schedules and the first
    candidate's default (what efir runs untuned) side by side, twice each
    in turn, and keep the fastest: one quick time each, taken minutes apart
    (the first on a GPU that had not yet warmed up), can rank them wrongly,
    and the tuned result must never be slower than the default. Only
    schedules measured correct are re-timed; `res` is updated in place
    (`confirmed`: {schedule text: microseconds})."""
    if res["name"] is None:
        return
    ok = sorted(((t, n, c) for n, c, t in res["trace"] if t is not None), key=lambda x: x[0])
    picks, keys = [], set()
    for _, n, c in ok[:CONFIRM] + [(None, n, c) for _, n, c in ok if n == first and _key(c) == _key(default)]:
        if (n, _key(c)) not in keys:
            keys.add((n, _key(c)))
            picks.append((n, c))
    if len(picks) < 2:
        return
    best = {}
    with pool.gpu_lock() if pool is not None else contextlib.nullcontext():
        for _ in range(2):
            for n, c in picks:
                mod = loaded[n]
                run = (lambda m=mod, cc=c: m.run(*inputs, config=cc))
                try:
                    if timer is not None:
                        t = float(timer(n, mod, c, run))
                    else:
                        run()  # warm (its kernels compiled and loaded)
                        t = graph_time_us(lambda *xs, m=mod, cc=c: m.run(*xs, config=cc), inputs, rep=50)
                except Exception:  # noqa: BLE001 (measured before: keep its first time)
                    continue
                k = (n, _key(c))
                best[k] = min(best.get(k, math.inf), t)
    if not best:
        return
    (n, _), t = min(best.items(), key=lambda kv: kv[1])
    c = next(cc for nn, cc in picks if nn == n and (nn, _key(cc)) in best and best[(nn, _key(cc))] == t)
    res["confirmed"] = {f"@{nn} {schedule_text(cc)}": round(best[(nn, _key(cc))], 3) for nn, cc in picks if (nn, _key(cc)) in best}
    res.update({"name": n, "config": dict(c), "time_us": t})


def tune_file(path, out, budget_s=60.0, top=4, timer=None, cache=None, progress=None, seed=0, inputs=None, expected=None):
    """Tune the candidates of .efir file `path` and write the tuned file to
    `out`. `timer(name, mod, cfg, run)` -> microseconds replaces the GPU
    timing (tests); correctness is checked either way, against `expected`
    (tensors) on `inputs` (tensors in the program's argument order) where
    given (`efir.compile`: the model's own parameters, the example inputs
    and eager PyTorch's outputs), else against efir's interpreter (`efir-run`)
    on random inputs. Returns a summary dict; `cached` is true when the
    result came from the cache."""
    import tempfile

    import numpy as np
    import torch

    path, out = pathlib.Path(path), pathlib.Path(out)
    text = canonical(read_input(path), str(path))
    env = environment()
    key = cache_key(text, env, top)
    own = cache is None
    cache = cache or Cache()
    try:
        hit = cache.get(key)
        if hit is not None:
            out.write_text(tuned_module(text, hit["candidate"], hit["schedule"]))
            return {"cached": True, "candidate": hit["candidate"], "config": hit["schedule"], "time_us": hit["time_us"], "measured": 0, "seconds": 0.0, "key": key}
        mods = shortlist(text, top)
        if not mods:
            raise TuneError(f"no candidate of `{path}` could be translated")
        cuda = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
        if not cuda and timer is None:
            raise TuneError("tuning measures on a CUDA GPU; none is available (TRITON_INTERPRET=1 runs only with a given timer)")
        device = "cuda" if cuda else "cpu"
        with tempfile.TemporaryDirectory(prefix="efir-tune-") as d:
            d = pathlib.Path(d)
            loaded, paths = {}, {}
            for i, (name, src) in enumerate(mods):
                p = d / f"cand{i}.py"
                p.write_text(src)
                loaded[name] = _load(p, f"{os.getpid()}_{i}")
                paths[name] = p
            first = mods[0][0]
            if inputs is None:
                ref = reference(text, first, d / "ref")
                mod0 = loaded[first]
                inputs = [torch.from_numpy(np.ascontiguousarray(np.load(ref / f"in_{n}.npy"))).to(device=device, dtype=dt) for n, _, dt in mod0.INPUTS]
                outs = [torch.from_numpy(np.ascontiguousarray(np.load(ref / f"out{i}.npy"))) for i in range(len(list(ref.glob("out*.npy"))))]
            else:
                inputs = [t.detach().to(device) for t in inputs]
                outs = [o.detach().float().cpu() for o in expected]

            srcs = dict(mods)
            res = tune_modules([(name, paths[name], loaded[name], srcs[name]) for name, _ in mods], inputs, outs, budget_s, timer=timer, progress=progress, seed=seed, cuda=cuda)
            failures = res["failures"]
        if res["name"] is None:
            first = failures[0] if failures else "nothing was measured"
            raise TuneError(f"no schedule of the {len(mods)} shortlisted candidates computed the right result (first failure: {first})")
        out.write_text(tuned_module(text, res["name"], res["config"]))
        cache.put(key, res["name"], res["config"], res["time_us"], {"env": env, "file": str(path), "measured": res["measured"]})
        return {"cached": False, "candidate": res["name"], "config": res["config"], "time_us": res["time_us"], "measured": res["measured"], "seconds": round(res["seconds"], 2), "key": key}
    finally:
        if own:
            cache.close()
