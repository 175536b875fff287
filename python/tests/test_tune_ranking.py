"""The fitted ranking model of bench/gpu/ranking.py: the within-case fit
recovers known coefficients, leave-one-workload-out ranks perfectly when
the model is right, and the static features of an emitted module (program
counts per kernel at the default schedule) are read from its text."""

import importlib.util
import math
import os
import pathlib
import random
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("efir_bench_ranking", ROOT / "bench" / "gpu" / "ranking.py")
ranking = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ranking)


def synthetic(rng, workloads=4, per=3, cands=5):
    cases = []
    for w in range(workloads):
        for b in range(per):
            offset = rng.uniform(0, 5)
            rows = []
            for c in range(cands):
                est, k = rng.uniform(5, 500), rng.randint(1, 4)
                t = math.exp(offset + 0.5 * math.log(est) + 0.3 * k)
                rows.append({"candidate": f"c{c}", "estimate_us": est, "kernels": k, "best_us": t, "features": None})
            cases.append({"file": "x", "workload": f"w{w}", "B": b, "rows": rows})
    return cases


def test_fit_recovers_known_coefficients_and_ranks_held_out_workloads():
    cases = synthetic(random.Random(1))
    coef = ranking.fit(cases, "json", ridge=1e-6)
    assert coef == pytest.approx([0.5, 0.3], abs=1e-3)
    res = ranking.evaluate(cases, "json")
    assert len(res) == len(cases)
    assert all(r["rho_fit"] == pytest.approx(1.0) and r["first_fit"] == 1.0 for r in res)
    # the estimate alone misses the kernels' cost
    assert sum(r["rho_est"] for r in res) / len(res) < 0.99


def test_spearman_and_its_degenerate_cases():
    assert ranking.spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert ranking.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert ranking.spearman([1, 2], [1, 2]) is None
    assert ranking.spearman([1, 1, 1], [1, 2, 3]) is None


@pytest.mark.skipif(os.environ.get("EFIR_SKIP_TRITON") == "1", reason="no triton")
def test_module_features_count_programs_per_kernel(tmp_path):
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h

    src = h.sh(h.tool("efir-translate"), "--to-triton", str(ROOT / "examples" / "small" / "layernorm_gemm.efir")).stdout
    f = ranking.module_features(src)
    assert f["kernels"] == src.count("@triton.jit") == len(f["programs"])
    assert f["bytes"] > 0 and f["time_us"] > 0
    # the first launch's programs: the product of its grid's tile counts at the defaults
    ns = {}
    exec(src.split("\nINPUTS = [")[0].split('"""', 2)[2].replace("import triton.language as tl", "").replace("import triton", "").replace("import torch", ""), ns)
    assert all(p >= 1 for p in f["programs"])
    grid = next(line for line in src.splitlines() if line.strip().startswith("_k0_")).split("[(")[1].split(",)]")[0]
    ext = {}
    for line in src.splitlines():
        line = line.strip()
        if line.startswith("nt_") and "triton.cdiv(" in line:
            a = line.split(" = ")[0][3:]
            e, b = line.split("triton.cdiv(")[1].rstrip(")").split(", ")
            ext[a] = math.ceil(int(e) / ns["DEFAULT_CONFIG"]["BLOCK_" + b[6:]])
    assert f["programs"][0] == math.prod(ext[x.strip()[3:]] for x in grid.split("*"))


@pytest.mark.skipif(os.environ.get("EFIR_SKIP_TRITON") == "1", reason="no triton")
def test_estimate_points_estimates_each_timed_schedule(tmp_path):
    """bench/gpu/estimate_points.py re-translates a candidate at each schedule
    a run timed: at the module's DEFAULT_CONFIG it gives the module's own
    ESTIMATE, at another legal schedule another one, and a candidate the
    candidate file lacks is left out."""
    import json as _json
    import re as _re

    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h

    spec = importlib.util.spec_from_file_location("efir_bench_points", ROOT / "bench" / "gpu" / "estimate_points.py")
    points = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(points)
    gen = tmp_path / "src"
    gen.mkdir()
    cands = gen / "layernorm_gemm_B16.cands.efir"
    h.sh(h.tool("efir-opt"), str(ROOT / "examples" / "small" / "layernorm_gemm.efir"), "--saturate",
         "--compact=max-candidates=2", "-o", str(cands))
    src = h.sh(h.tool("efir-translate"), "--to-triton", "--func", "layernorm_gemm.c0", str(cands)).stdout
    default = eval(_re.search(r"^DEFAULT_CONFIG = (\{.*?\n\})", src, _re.M | _re.S).group(1))  # noqa: S307
    space = eval(_re.search(r"^CONFIG_SPACE = (\{.*?\n\})", src, _re.M | _re.S).group(1))  # noqa: S307
    est = _json.loads(_re.search(r"^ESTIMATE = (\{.*\})$", src, _re.M).group(1))["time_us"]
    # the largest legal block of the first axis: another schedule
    key = next(k for k in default if k.startswith("BLOCK_") and len(space[k]) > 1)
    other = dict(default, **{key: max(space[key]) if default[key] != max(space[key]) else min(space[key])})
    other["num_warps"] = 8
    res = {"workload": "layernorm_gemm", "B": 16, "efir": [
        {"candidate": "layernorm_gemm_c0", "config": default, "quick_us": 5.0},
        {"candidate": "layernorm_gemm_c0", "config": other, "quick_us": 9.0},
        {"candidate": "layernorm_gemm_c99", "config": default, "quick_us": 1.0},
        {"candidate": "layernorm_gemm_c0", "config": default, "quick_us": None},
    ]}
    pts = points.case_points(res, str(gen), h.tool("efir-translate"))
    assert [p["measured_us"] for p in pts] == [5.0, 9.0]
    assert pts[0]["estimate_us"] == pytest.approx(est)
    assert pts[1]["estimate_us"] != pytest.approx(est)
    assert all(p["candidate"] == "layernorm_gemm_c0" for p in pts)


def test_case_rows_keep_the_estimate_of_a_candidate_whose_last_entry_has_none():
    """tune_bench records end with a `tuned` entry (re-timed beside the peers)
    that carries no estimate: the candidate keeps the estimate of its other
    entries, and every candidate is ranked by its quick times."""
    rec = {
        "efir": [
            {"candidate": "a", "estimate_us": 10.0, "kernels": 2, "ok": True, "phase": "tuner", "quick_us": 30.0},
            {"candidate": "a", "estimate_us": 10.0, "kernels": 2, "ok": True, "phase": "tuner", "quick_us": 20.0},
            {"candidate": "b", "estimate_us": 12.0, "kernels": 1, "ok": True, "phase": "tuner", "quick_us": 25.0},
            {"candidate": "c", "estimate_us": 14.0, "kernels": 1, "ok": False, "phase": "tuner"},
            {"candidate": "c", "estimate_us": 14.0, "kernels": 1, "ok": True, "phase": "wide", "quick_us": 40.0},
            {"candidate": "a", "config": {}, "ok": True, "time_us": 5.0, "phase": "tuned"},
        ]
    }
    assert ranking.case_ranking(rec) == [("a", 10.0, 20.0), ("b", 12.0, 25.0), ("c", 14.0, 40.0)]
    rows = ranking.case_rows(rec)
    assert [r["kernels"] for r in rows] == [2, 1, 1]
