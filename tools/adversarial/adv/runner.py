"""Running the cases: each in a folder of its own, in parallel (`execute`)."""

import concurrent.futures as cf
import os
import pathlib
import shutil
import tempfile
import time

from .checks import classify
from .model import PY
from .proc import run_tool

class Ctx:
    def __init__(self, bin_dir):
        self.bin_dir = bin_dir

    def tool(self, name):
        return str(self.bin_dir / name)


def prepare(case, d, ctx):
    for name, content in case.files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple) and content[0] == "sparse":
            with open(p, "wb") as f:
                f.truncate(content[1])
        elif isinstance(content, tuple) and content[0] == "mode":
            p.write_text(content[1])
            os.chmod(p, content[2])
        else:
            p.write_bytes(content if isinstance(content, bytes) else content.encode())
    if case.tool == "python":
        argv = [PY] + case.argv
        env = dict(case.env)
        if env.get("EFIR_BIN_DIR") == "BIN":
            env["EFIR_BIN_DIR"] = str(ctx.bin_dir)
        return argv, env
    return [ctx.tool(case.tool)] + case.argv, case.env


def run_case(case, ctx, base):
    d = pathlib.Path(tempfile.mkdtemp(prefix="case-", dir=base))
    try:
        argv, env = prepare(case, d, ctx)
        res = run_tool(ctx.bin_dir, argv, d, case.timeout, env=env, stdin=case.stdin, stdout=case.stdout)
        outcome, note = classify(case, res, d, ctx)
        return case, outcome, note, res.secs
    except Exception as e:  # a bug of the campaign itself
        return case, "campaign-error", f"{type(e).__name__}: {e}", 0.0
    finally:
        for p in d.rglob("*"):
            try:
                os.chmod(p, 0o700)
            except OSError:
                pass
        shutil.rmtree(d, ignore_errors=True)


def execute(cases, ctx, jobs, verbose=False):
    """Run `cases` on `jobs` threads, printing each case that is not `clean`
    or `success` (every case with `verbose`) as it ends; returns the
    `(case, outcome, note, seconds)` of each, in the order they ended, and
    the wall time."""
    base = tempfile.mkdtemp(prefix="efir-adversarial-")
    results = []
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(jobs) as ex:
        futs = [ex.submit(run_case, c, ctx, base) for c in cases]
        for i, f in enumerate(cf.as_completed(futs)):
            case, outcome, note, secs = f.result()
            results.append((case, outcome, note, secs))
            if outcome not in ("clean", "success") or verbose:
                print(f"[{i + 1}/{len(cases)}] {case.tool} {case.cat}/{case.name}: {outcome}: {note}", flush=True)
    shutil.rmtree(base, ignore_errors=True)
    return results, time.monotonic() - t0
