"""Launch groups (horizontal fusion) on and off, one module at a time:
each generated module whose run() has a launch group is timed at the given
schedules as emitted (the group's kernel where its members share warps and
stages) and with the group's condition forced false (its members launched
one by one), in one process on the same inputs (CUDA graphs, median).

Usage (GPU machine, repo root): python3 bench/gpu/group_probe.py MODULE.py '{cfg}' ... [-- MODULE.py '{cfg}' ...]"""
import importlib.util
import json
import re
import sys

import torch
from triton.testing import do_bench_cudagraph


def load(path, off):
    text = open(path).read()
    if off:
        # `if <warps and stages equal>:` before a group launch -> `if False:`
        text = re.sub(r"^(    if )cfg\.get\(\"num_warps_k\d+\".*:$", r"\1False:", text, flags=re.M)
    name = f"m{abs(hash((path, off)))}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(compile(text, path, "exec"), mod.__dict__)
    return mod


def main(argv):
    jobs, cur = [], None
    for a in argv:
        if a.endswith(".py"):
            cur = (a, [])
            jobs.append(cur)
        elif a != "--":
            cur[1].append(json.loads(a))
    torch.manual_seed(0)
    for path, cfgs in jobs:
        on, off = load(path, False), load(path, True)
        xs = [(torch.randn(s, device="cuda") / (s[-2] ** 0.5 if len(s) > 1 else 1)).to(dt) for _, s, dt in on.INPUTS]
        for cfg in cfgs or [None]:
            try:
                a = on.run(*xs, config=cfg).float()
                b = off.run(*xs, config=cfg).float()
                diff = float((a - b).norm() / b.norm())
                t_on = do_bench_cudagraph(lambda: on.run(*xs, config=cfg), rep=200) * 1e3
                t_off = do_bench_cudagraph(lambda: off.run(*xs, config=cfg), rep=200) * 1e3
                t_on2 = do_bench_cudagraph(lambda: on.run(*xs, config=cfg), rep=200) * 1e3
                print(f"{path.split('/')[-1]:24s} {json.dumps(cfg)}: grouped {t_on:6.1f}/{t_on2:6.1f} us, one by one {t_off:6.1f} us (outputs differ by {diff:.1e})", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"{path}: {cfg}: {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
