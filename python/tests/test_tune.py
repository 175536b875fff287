"""Schedule tuning (efir.tune): the search with fake timers, the cache
(keys, hits, concurrent writers), the tuned file, and an end-to-end tune
under TRITON_INTERPRET=1 that must pick the candidate whose fake time is
lowest and record its schedule so that efir-translate emits it."""

import math
import multiprocessing
import os
import pathlib
import sys

import pytest

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from efir import tune  # noqa: E402

SPACE = {"BLOCK_m": [1, 2, 4, 8, 16, 32, 64], "BLOCK_n": [16, 32, 64, 128], "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3, 4, 5]}
DEFAULT = {"BLOCK_m": 4, "BLOCK_n": 16, "num_warps": 4, "num_stages": 2}


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def bowl(best, scale=1.0):
    """A cost with its minimum at `best`, log-distance in each block."""
    def cost(cfg):
        d = sum(abs(math.log2(cfg[k]) - math.log2(v)) for k, v in best.items())
        return scale * (10.0 + 5.0 * d)
    return cost


def test_search_finds_the_best_schedule_of_the_best_candidate():
    clock = FakeClock()
    costs = {"a": bowl({"BLOCK_m": 32, "BLOCK_n": 64, "num_warps": 8}, 1.0), "b": bowl({"BLOCK_m": 8, "BLOCK_n": 128, "num_warps": 4}, 1.5)}
    calls = []

    def measure(name, cfg):
        clock.t += 0.1
        calls.append(name)
        return costs[name](cfg)

    res = tune.search([("b", DEFAULT, SPACE), ("a", DEFAULT, SPACE)], measure, budget_s=30.0, clock=clock)
    assert res["name"] == "a"
    assert (res["config"]["BLOCK_m"], res["config"]["BLOCK_n"], res["config"]["num_warps"]) == (32, 64, 8)
    assert res["time_us"] == pytest.approx(10.0)
    # successive halving: after the first round only the better candidate is measured
    first = 2 * 8
    assert set(calls[first:]) == {"a"}


def test_search_respects_its_budget_and_skips_infeasible_schedules():
    clock = FakeClock()

    def measure(name, cfg):
        clock.t += 1.0
        if cfg["BLOCK_m"] * cfg["BLOCK_n"] > 1024:
            return None  # does not fit
        return 100.0 / (cfg["BLOCK_m"] * cfg["BLOCK_n"])

    res = tune.search([("a", DEFAULT, SPACE)], measure, budget_s=12.0, clock=clock)
    assert res["measured"] <= 13
    assert res["config"]["BLOCK_m"] * res["config"]["BLOCK_n"] <= 1024
    assert all(t is None or t >= res["time_us"] for _, _, t in res["trace"])


def test_search_with_nothing_correct_returns_no_candidate():
    res = tune.search([("a", DEFAULT, SPACE)], lambda n, c: None, budget_s=5.0, clock=FakeClock())
    assert res["name"] is None and res["time_us"] is None


def test_neighbours_stay_in_the_space():
    for nb in tune.neighbours(DEFAULT, SPACE):
        for k, v in nb.items():
            assert v in SPACE[k]
        assert sum(nb[k] != DEFAULT[k] for k in DEFAULT) == 1


def test_timing_rotates_inputs_that_would_sit_in_l2():
    l2 = tune.L2_BYTES
    assert tune.rotation(10 * l2) == 1  # far beyond the L2: no copies
    assert tune.rotation(l2) == 3  # three copies cover 3x the L2
    assert tune.rotation(1) == 8  # tiny inputs: at most 8 copies
    assert tune.rotation(0) == 8


def test_cache_keys_hits_and_clear(tmp_path):
    c = tune.Cache(tmp_path / "t.sqlite")
    env = {"device": "X", "triton": "3.6", "torch": "2.11", "efir": "0"}
    k1 = tune.cache_key("func @f", env, 4)
    assert k1 != tune.cache_key("func @g", env, 4)
    assert k1 != tune.cache_key("func @f", {**env, "device": "Y"}, 4)
    assert k1 != tune.cache_key("func @f", env, 2)
    assert c.get(k1) is None
    c.put(k1, "f.c1", {"BLOCK_m": 8}, 12.5, {"env": env})
    hit = c.get(k1)
    assert hit["candidate"] == "f.c1" and hit["schedule"] == {"BLOCK_m": 8} and hit["time_us"] == 12.5
    assert len(c.entries()) == 1
    assert c.clear() == 1 and c.get(k1) is None


def _writer(path, i):
    c = tune.Cache(path)
    for j in range(25):
        c.put(f"k{i}_{j}", "c", {"BLOCK_m": j}, float(j), {"w": i})
    c.close()


def test_cache_takes_concurrent_writers(tmp_path):
    path = tmp_path / "t.sqlite"
    tune.Cache(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(tune.Cache(path).entries()) == 100


def test_tuned_module_keeps_the_chosen_candidate_and_its_helpers():
    text = (
        'func @f.c0(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kernels = 1, source = @f} {\n  return %x : tensor<4xf32>\n}\n\n'
        'func @f.c1(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kernels = 1, source = @f} {\n  return %x : tensor<4xf32>\n}\n\n'
        'func @efir.h(%x: tensor<f32>) -> tensor<f32> {\n  return %x : tensor<f32>\n}\n'
    )
    out = tune.tuned_module(text, "f.c1", {"BLOCK_m": 8, "num_warps": 2})
    assert "@f.c0" not in out and "@efir.h" in out
    assert 'attributes {schedule = "BLOCK_m=8,num_warps=2", kernels = 1, source = @f}' in out
    assert tune.schedule_text({"num_stages": 3, "BLOCK_n": 2, "num_warps": 4, "BLOCK_m": 1}) == "BLOCK_m=1,BLOCK_n=2,num_warps=4,num_stages=3"
    again = tune.tuned_module(out, "f.c1", {"BLOCK_m": 4})
    assert again.count("schedule =") == 1 and 'schedule = "BLOCK_m=4"' in again


@pytest.mark.skipif(os.environ.get("EFIR_SKIP_TRITON") == "1", reason="no triton")
def test_tune_end_to_end_picks_the_faster_candidate(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h

    monkeypatch.setenv("EFIR_NO_NATIVE", "1")
    monkeypatch.setenv("EFIR_BIN_DIR", os.path.dirname(h.tool("efir-opt")))
    cands = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(ROOT / "examples" / "small" / "gated_mlp.efir"), "--saturate", "--compact=max-candidates=3", "-o", str(cands))
    names = [n for n, _ in tune.functions(cands.read_text())]
    assert len(names) >= 2
    fast = names[-1]
    seen = []

    def timer(name, mod, cfg, run):
        seen.append(name)
        base = 5.0 if name == fast else 50.0
        return base + cfg.get("num_warps", 4)  # fewer warps is faster

    cache = tune.Cache(tmp_path / "cache.sqlite")
    out = tmp_path / "tuned.efir"
    res = tune.tune_file(cands, out, budget_s=20.0, top=3, timer=timer, cache=cache)
    assert not res["cached"] and res["candidate"] == fast, res
    assert fast in seen and len(set(seen)) >= 2
    text = out.read_text()
    assert f"func @{fast}(" in text and "schedule =" in text
    # the tuned file translates with the schedule as DEFAULT_CONFIG
    r = h.sh(h.tool("efir-translate"), "--to-triton", str(out))
    for k, v in res["config"].items():
        assert f'"{k}": {v},' in r.stdout
    # a second tune of the same file measures nothing
    seen.clear()
    res2 = tune.tune_file(cands, tmp_path / "tuned2.efir", budget_s=20.0, top=3, timer=timer, cache=cache)
    assert res2["cached"] and res2["candidate"] == fast and not seen
    assert (tmp_path / "tuned2.efir").read_text() == text


def test_search_hands_each_round_to_prepare_before_measuring():
    f = bowl({"BLOCK_m": 16, "BLOCK_n": 64})
    measured, batches = [], []

    def measure(name, cfg):
        measured.append((name, tuple(sorted(cfg.items()))))
        return f(cfg)

    def prepare(batch):
        batches.append([(n, tuple(sorted(c.items()))) for n, c in batch])
        # nothing of this round has been measured yet
        assert not set(batches[-1]) & set(measured)

    res = tune.search([("a", DEFAULT, SPACE)], measure, budget_s=1e9, clock=FakeClock(), prepare=prepare)
    assert len(batches) >= 2 and res["measured"] == len(measured)
    # every measured schedule was prepared first
    assert set(measured) <= {x for b in batches for x in b}


@pytest.mark.skipif(os.environ.get("EFIR_SKIP_TRITON") == "1", reason="no triton")
def test_precompile_runs_schedules_in_worker_processes(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h

    monkeypatch.setenv("EFIR_NO_NATIVE", "1")
    monkeypatch.setenv("EFIR_BIN_DIR", os.path.dirname(h.tool("efir-opt")))
    src = h.sh(h.tool("efir-translate"), "--to-triton", str(ROOT / "examples" / "small" / "gated_mlp.efir")).stdout
    mod = tmp_path / "m.py"
    mod.write_text(src)
    ns = {}
    exec(compile(src.split("\n@triton.jit")[0], "m", "exec"), ns)  # DEFAULT_CONFIG and CONFIG_SPACE
    small = {k: min(v) for k, v in ns["CONFIG_SPACE"].items()}
    jobs = [(mod, ns["DEFAULT_CONFIG"]), (mod, small), (tmp_path / "missing.py", ns["DEFAULT_CONFIG"])]
    assert tune.precompile(jobs, workers=2, timeout=120) == 2
