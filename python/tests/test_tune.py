"""Schedule tuning (efir.tune): the search with fake timers, the cache
(keys, hits, concurrent writers), the tuned file, and an end-to-end tune
under TRITON_INTERPRET=1 that must pick the candidate whose fake time is
lowest and record its schedule so that efir-translate emits it."""

import math
import re
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
    nbs = tune.neighbours(DEFAULT, SPACE)
    for nb in nbs:
        for k, v in nb.items():
            assert v in SPACE[k]
        moved = [k for k in DEFAULT if nb[k] != DEFAULT[k]]
        # one parameter, or one block and num_warps the same way
        assert len(moved) == 1 or (
            len(moved) == 2
            and "num_warps" in moved
            and (nb[moved[0]] > DEFAULT[moved[0]]) == (nb["num_warps"] > DEFAULT["num_warps"])
        ), moved
    assert len(set(map(lambda c: tuple(sorted(c.items())), nbs))) == len(nbs)


def test_neighbours_double_a_block_with_its_warps():
    space = {"BLOCK_m": [32, 64, 128], "BLOCK_n": [64], "num_warps": [2, 4, 8], "num_stages": [2, 3]}
    cfg = {"BLOCK_m": 64, "BLOCK_n": 64, "num_warps": 4, "num_stages": 3}
    nbs = tune.neighbours(cfg, space)
    assert {**cfg, "BLOCK_m": 128, "num_warps": 8} in nbs
    assert {**cfg, "BLOCK_m": 32, "num_warps": 2} in nbs
    assert {**cfg, "BLOCK_m": 128} in nbs
    # kept to the keys it may move (one kernel's group without num_warps)
    assert all(c["num_warps"] == 4 for c in tune.neighbours(cfg, space, {"BLOCK_m"}))


def test_neighbours_cap_registers_at_eight_warps():
    space = {"BLOCK_m": [64, 128], "num_warps": [4, 8], "num_warps_k1": [4, 8], "num_stages": [3, 4]}
    cfg = {"BLOCK_m": 128, "num_warps": 4, "num_warps_k1": 8, "num_stages": 4}
    nbs = tune.neighbours(cfg, space)
    # kernel 1 at 8 warps: capped at 128 registers; the program's 4 warps: no cap
    assert {**cfg, "maxnreg_k1": 128} in nbs
    assert not any("maxnreg" in c for c in nbs)
    # a capped schedule's neighbours lift the cap
    capped = {**cfg, "maxnreg_k1": 128}
    assert cfg in tune.neighbours(capped, space)
    # only with its warps' key
    assert not any("maxnreg_k1" in c for c in tune.neighbours(cfg, space, {"BLOCK_m"}))
    # the schedule attribute carries it (efir-translate accepts maxnreg_k<i>)
    assert "maxnreg_k1=128" in tune.schedule_text(capped)


def test_samples_include_whole_rows_where_a_domain_holds_them():
    import random

    space = {"BLOCK_k4096": [64, 1024, 2048, 4096], "BLOCK_g0_1": [1, 32, 4096],
             "BLOCK_m16": [16], "num_warps": [2, 4, 8], "num_stages": [2, 3]}
    default = {"BLOCK_k4096": 1024, "BLOCK_g0_1": 32, "BLOCK_m16": 16, "num_warps": 4, "num_stages": 2}
    out = tune.samples(default, space, 8, random.Random(0))
    assert out[0] == default
    # The default's blocks at 2 and 8 warps.
    assert out[1:3] == [{**default, "num_warps": 2}, {**default, "num_warps": 8}]
    # Every block that can hold a whole row at its largest value, the
    # others as the default has them; random samples stay at MAX_BLOCK.
    assert out[3] == {**default, "BLOCK_k4096": 4096, "BLOCK_g0_1": 4096, "num_warps": 8}
    assert out[4] == {**default, "BLOCK_k4096": 4096, "BLOCK_g0_1": 4096}
    assert all(c["BLOCK_k4096"] <= tune.MAX_BLOCK for c in out[5:])
    assert len(out) == 8
    # Matmul dims (domains up to 1024) get no whole-row points.
    mm = {"BLOCK_k4096": [64, 1024], "num_warps": [4, 8], "num_stages": [2]}
    assert tune.whole_rows({"BLOCK_k4096": 64, "num_warps": 4, "num_stages": 2}, mm) == []
    # A kernel's statistics loops (beside its matmul's K loop) in one block.
    st = {**mm, "BLOCK_k4096__r0": [16, 64, 1024]}
    d = {"BLOCK_k4096": 64, "BLOCK_k4096__r0": 64, "num_warps": 4, "num_stages": 2}
    assert tune.whole_rows(d, st)[0] == {**d, "BLOCK_k4096__r0": 1024, "num_warps": 8}


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


WRITER = """
import sys, types
pkg = types.ModuleType("efir")  # efir.tune without the package's torch import
pkg.__path__ = [sys.argv[1]]
sys.modules["efir"] = pkg
from efir import tune
c = tune.Cache(sys.argv[2])
i = int(sys.argv[3])
for j in range(25):
    c.put(f"k{i}_{j}", "c", {"BLOCK_m": j}, float(j), {"w": i})
c.close()
"""


def test_cache_takes_concurrent_writers(tmp_path):
    import subprocess

    path = tmp_path / "t.sqlite"
    tune.Cache(path).close()
    pkg = str(ROOT / "python" / "efir")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pkg, str(path), str(i)]) for i in range(4)]
    for p in procs:
        assert p.wait(120) == 0
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
    # A family's module (symbolic extents in INPUTS) runs in a worker at the
    # shapes its tuner writes as TUNE_SHAPES, and not without them.
    sym = (ROOT / "examples" / "small" / "gated_mlp.efir").read_text()
    b = re.search(r"%x: tensor<(\d+)x", sym)[1]
    sym = sym.replace(f"tensor<{b}x", "tensor<|@dyn0|x")
    (tmp_path / "sym.efir").write_text(sym)
    src = h.sh(h.tool("efir-translate"), "--to-triton", str(tmp_path / "sym.efir")).stdout
    assert '"dyn0"' in src
    (tmp_path / "sym.py").write_text(src)
    shapes = []
    for line in re.findall(r'^    \("\w+", \(([^)]*)\), torch\.\w+\),$', src, re.M):
        shapes.append(tuple(3 if d.strip() == '"dyn0"' else int(d) for d in line.split(",") if d.strip()))
    (tmp_path / "sym_tuned.py").write_text(f"{src}\nTUNE_SHAPES = {shapes!r}\n")
    assert tune.precompile([(tmp_path / "sym.py", ns["DEFAULT_CONFIG"])], workers=1, timeout=120) == 0
    assert tune.precompile([(tmp_path / "sym_tuned.py", ns["DEFAULT_CONFIG"])], workers=1, timeout=120) == 1


# ------------------------------------------------ per-kernel tuning (item 1)
TWO_KERNELS = '''
DEFAULT_CONFIG = {"BLOCK_k64": 16, "BLOCK_g0_0": 8, "BLOCK_g1_0": 8, "BLOCK_n8": 8, "num_warps": 4, "num_stages": 2}


@triton.jit
def _k0__p(p_x_0, p__p_0, BLOCK_k64: tl.constexpr, NT_k64: tl.constexpr, BLOCK_g0_0: tl.constexpr, NT_g0_0: tl.constexpr, BLOCK_g1_0: tl.constexpr, NT_g1_0: tl.constexpr, BLOCK_n8: tl.constexpr):
    """Writes %p; grid over [@k64, @g0_0]."""
    pid = tl.program_id(0)
    idx_k64 = pid % NT_k64
    offs_g0_0 = (pid // NT_k64) * BLOCK_g0_0 + tl.arange(0, BLOCK_g0_0)
    tl.store(p__p_0 + offs_g0_0, tl.load(p_x_0 + offs_g0_0))


@triton.jit
def _k1__y(p__p_0, p__y_0, BLOCK_k64: tl.constexpr, NT_k64: tl.constexpr, NTP_k64: tl.constexpr, BLOCK_g0_0: tl.constexpr, NT_g0_0: tl.constexpr, BLOCK_g1_0: tl.constexpr, NT_g1_0: tl.constexpr, BLOCK_n8: tl.constexpr):
    """Writes %y; grid over [@g1_0]."""
    ar = tl.arange(0, NTP_k64)
    offs_g1_0 = tl.program_id(0) * BLOCK_g1_0 + tl.arange(0, BLOCK_g1_0)
    tl.store(p__y_0 + offs_g1_0, tl.load(p__p_0 + offs_g1_0))


def run(*inputs, config=None):
    cfg = dict(DEFAULT_CONFIG)
    b__p_0 = torch.empty((nt_k64, 64), dtype=torch.float16, device=dev)
    _k0__p[(nt_k64 * nt_g0_0,)](b_x_0, b__p_0, BLOCK_k64=block_k64, NT_k64=nt_k64, BLOCK_g0_0=block_g0_0, NT_g0_0=nt_g0_0, BLOCK_g1_0=block_g1_0, NT_g1_0=nt_g1_0, BLOCK_n8=block_n8, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    b__y_0 = torch.empty((64,), dtype=torch.float16, device=dev)
    _k1__y[(nt_g1_0,)](b__p_0, b__y_0, BLOCK_k64=block_k64, NT_k64=nt_k64, NTP_k64=ntp_k64, BLOCK_g0_0=block_g0_0, NT_g0_0=nt_g0_0, BLOCK_g1_0=block_g1_0, NT_g1_0=nt_g1_0, BLOCK_n8=block_n8, num_warps=cfg.get("num_warps_k1", cfg["num_warps"]), num_stages=cfg["num_stages"])
    return b__y_0
'''
TWO_SPACE = {"BLOCK_k64": [16, 32, 64], "BLOCK_g0_0": [8, 16, 32, 64], "BLOCK_g1_0": [8, 16, 32, 64], "BLOCK_n8": [8], "num_warps": [1, 2, 4, 8], "num_warps_k1": [1, 2, 4, 8], "num_stages": [1, 2, 3]}


def test_structure_maps_parameters_to_kernels():
    st = tune.structure(TWO_KERNELS, TWO_SPACE)
    assert [k for k, _ in st["kernels"]] == ["_k0__p", "_k1__y"]
    k0, k1 = (keys for _, keys in st["kernels"])
    # every kernel takes every block; each uses only its own, its grid's and its launch's
    assert k0 == {"BLOCK_k64", "BLOCK_g0_0", "num_warps", "num_stages"}
    assert k1 == {"BLOCK_k64", "BLOCK_g1_0", "num_warps", "num_warps_k1", "num_stages"}
    assert st["shaping"] == {"BLOCK_k64"}  # one slot of partial results per k64 tile
    assert st["inert"] == {"BLOCK_n8"}
    gs, inert = tune.groups(TWO_KERNELS, TWO_SPACE)
    assert gs == [["BLOCK_k64", "num_warps", "num_stages"], ["BLOCK_g0_0"], ["BLOCK_g1_0", "num_warps_k1"]]
    assert inert == {"BLOCK_n8"}
    # one kernel: one group of everything it uses
    one = TWO_KERNELS.split("@triton.jit")[0] + "@triton.jit" + TWO_KERNELS.split("@triton.jit")[1]
    one += "\n\ndef run(*inputs, config=None):\n    _k0__p[(nt_k64 * nt_g0_0,)](b_x_0, num_warps=cfg[\"num_warps\"], num_stages=cfg[\"num_stages\"])\n"
    gs1, inert1 = tune.groups(one, TWO_SPACE)
    assert len(gs1) == 1 and set(gs1[0]) == {"BLOCK_k64", "BLOCK_g0_0", "num_warps", "num_stages"}


@pytest.mark.skipif(os.environ.get("EFIR_SKIP_TRITON") == "1", reason="no triton")
def test_structure_of_emitted_split_k_candidates(tmp_path):
    """The parse follows what efir-translate emits: a saturated gated_mlp
    has a candidate whose first kernel writes partial sums, one slot per
    k tile, that a second kernel reduces."""
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h

    cands = tmp_path / "cands.efir"
    h.sh(h.tool("efir-opt"), str(ROOT / "examples" / "small" / "gated_mlp.efir"), "--saturate", "--compact=max-candidates=4", "-o", str(cands))
    out = tmp_path / "py"
    h.sh(h.tool("efir-translate"), "--to-triton", str(cands), "--top", "4", "--output-dir", str(out))
    found = 0
    for f in sorted(out.glob("*.py")):
        src = f.read_text()
        ns = {}
        exec(src.split("\nINPUTS = [")[0], ns)
        space = ns["CONFIG_SPACE"]
        st = tune.structure(src, space)
        assert len(st["kernels"]) == src.count("@triton.jit"), f.name
        gs, inert = tune.groups(src, space)
        flat = [k for g in gs for k in g]
        assert len(flat) == len(set(flat)) and set(flat) | inert == set(space), f.name
        if len(st["kernels"]) > 1 and st["shaping"]:
            found += 1
            assert set(st["shaping"]) <= set(gs[0]) and {"num_warps", "num_stages"} <= set(gs[0])
            assert all(set(g).isdisjoint(st["shaping"]) for g in gs[1:])
            assert len(gs) >= 3  # shared, then each kernel's own blocks
    assert found, "no split-k candidate among the first four"


def test_pdl_is_a_shared_parameter_the_search_toggles(tmp_path):
    """A program of several launches offers `pdl` (programmatic dependent
    launch): one move toggles it, samples draw it, and it belongs to the
    shared group (it chains every launch)."""
    import random

    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h

    out = tmp_path / "group.py"
    h.sh(h.tool("efir-translate"), "--to-triton", str(ROOT / "lit-tests" / "Translate" / "triton-launch-group.efir"), "-o", str(out))
    src = out.read_text()
    ns = {}
    exec(src.split("\nINPUTS = [")[0], ns)
    space, default = ns["CONFIG_SPACE"], ns["DEFAULT_CONFIG"]
    assert space["pdl"] == [0, 1] and default["pdl"] == 1
    assert {**default, "pdl": 0} in tune.neighbours(default, space)
    assert "pdl" not in tune.structure(src, space)["inert"]
    gs, _ = tune.groups(src, space)
    assert "pdl" in gs[0]
    drawn = {c["pdl"] for c in tune.samples(default, space, 24, random.Random(0))}
    assert drawn == {0, 1}


def test_own_and_statistics_blocks_belong_to_their_kernel(tmp_path):
    """A kernel's own block of an axis (`BLOCK_k__k0`) and its statistics
    loops' block (`BLOCK_k__r0`) are read into host variables before the
    launch: they are that kernel's parameters, not inert ones."""
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h

    lit = ROOT / "lit-tests" / "Translate"
    for src_file, func, key in (("triton-kernel-blocks.efir", "@twok", "BLOCK_k__k0"),
                                ("triton-stat-blocks.efir", "@lg", "BLOCK_k__r0")):
        out = tmp_path / f"{func[1:]}.py"
        h.sh(h.tool("efir-translate"), "--to-triton", str(lit / src_file), "--func", func, "-o", str(out))
        src = out.read_text()
        ns = {}
        exec(src.split("\nINPUTS = [")[0], ns)
        space = ns["CONFIG_SPACE"]
        st = tune.structure(src, space)
        assert key not in st["inert"]
        assert key in st["kernels"][0][1]
        assert all(key not in keys for _, keys in st["kernels"][1:])


def test_search_tunes_one_kernel_at_a_time():
    """A two-kernel program whose time is the sum of its kernels' (a bowl
    per kernel in its own blocks, both depending on the shared block): the
    search finds the optimum, and after round 0 each round moves one
    group of one candidate's parameters, the others as in a measured
    schedule."""
    space = {"BLOCK_k": [16, 32, 64, 128, 256], "BLOCK_a": [1, 2, 4, 8, 16, 32, 64, 128], "BLOCK_b": [1, 2, 4, 8, 16, 32, 64, 128],
             "BLOCK_c": [1, 2, 4, 8, 16, 32, 64, 128], "BLOCK_d": [1, 2, 4, 8, 16, 32, 64, 128], "BLOCK_z": [1, 2, 4], "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3, 4, 5]}
    default = {"BLOCK_k": 16, "BLOCK_a": 1, "BLOCK_b": 1, "BLOCK_c": 1, "BLOCK_d": 1, "BLOCK_z": 1, "num_warps": 4, "num_stages": 2}
    gs = [["BLOCK_k", "num_warps", "num_stages"], ["BLOCK_a", "BLOCK_b"], ["BLOCK_c", "BLOCK_d"]]
    k0 = bowl({"BLOCK_a": 32, "BLOCK_b": 16})
    k1 = bowl({"BLOCK_c": 64, "BLOCK_d": 8}, 2.0)
    shared = bowl({"BLOCK_k": 64, "num_warps": 8})
    clock = FakeClock()

    def measure(name, cfg):
        clock.t += 0.1
        assert cfg["BLOCK_z"] == 1  # inert: never moved
        return k0(cfg) + k1(cfg) + shared(cfg)

    batches = []
    res = tune.search([("p", default, space, gs, {"BLOCK_z"})], measure, budget_s=1e9, clock=clock,
                      prepare=lambda b: batches.append([dict(c) for _, c in b]))
    best = {"BLOCK_k": 64, "BLOCK_a": 32, "BLOCK_b": 16, "BLOCK_c": 64, "BLOCK_d": 8, "num_warps": 8}
    assert {k: res["config"][k] for k in best} == best
    assert res["time_us"] == pytest.approx(40.0)
    seen = [tuple(sorted(c.items())) for c in batches[0]]
    for b in batches[1:]:
        moved = set()
        def diff(s, c):
            return {k for k in set(s) | set(c) if s.get(k) != c.get(k)}

        for c in b:
            # one step from a measured schedule (a block, or a block and
            # num_warps with it, or the register cap at 8 warps)
            near = [dict(s) for s in seen if len(diff(dict(s), c)) == 1]
            near += [dict(s) for s in seen if len(diff(dict(s), c)) == 2 and dict(s)["num_warps"] != c["num_warps"]]
            assert near, c
            # (the cap moves with its warps' group)
            moved |= {k.replace("maxnreg", "num_warps") for k in diff(near[0], c)}
        assert any(moved <= set(g) for g in gs), moved  # one group per round
        seen += [tuple(sorted(c.items())) for c in b]
    assert res["measured"] < 120


COMPILE_MOD = '''
import time
import torch

INPUTS = [("x", (4,), torch.float32)]


class OutOfResources(Exception):
    pass


def run(x, config=None):
    if config["BLOCK"] > 64:
        raise OutOfResources("out of resource: shared memory, Required: 262144, Hardware limit: 232448")
    if config["BLOCK"] == 3:
        time.sleep(600)
    return x * 2
'''


def test_compile_pool_classifies_and_outlives_a_hung_job(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text(COMPILE_MOD)
    pool = tune.CompilePool(workers=2)
    try:
        res = pool.run([(mod, {"BLOCK": 32}), (mod, {"BLOCK": 128}), (tmp_path / "gone.py", {"BLOCK": 1})], timeout=240)
        assert res[0] == {"ok": True, "id": res[0]["id"]}
        assert res[1]["kind"] == "infeasible" and "OutOfResources" in res[1]["error"]
        assert res[2]["kind"] == "error"
        before = [w["proc"] for w in pool.procs]
        t0 = tune.time.monotonic()
        res = pool.run([(mod, {"BLOCK": 3}), (mod, {"BLOCK": 16})], timeout=4)
        assert tune.time.monotonic() - t0 < 15
        assert res[0] is None and res[1]["ok"]  # hung past the deadline; the other worker went on
        hung = [p for p in before if p not in [w["proc"] for w in pool.procs]]
        assert len(hung) == 1 and hung[0].poll() is not None  # killed (started again by the next run)
        assert len(pool.procs) == 1
    finally:
        pool.close()


def test_search_measures_schedules_as_prepare_yields_them():
    """A prepare that yields batch indices as schedules compile: they are
    measured in that order; one never yielded (it did not compile in time)
    is not measured, except a candidate's default in round 0."""
    f = bowl({"BLOCK_m": 16, "BLOCK_n": 64})
    measured, rounds = [], []

    def measure(name, cfg):
        measured.append((name, tuple(sorted(cfg.items()))))
        return f(cfg)

    def prepare(batch):
        keys = [(n, tuple(sorted(c.items()))) for n, c in batch]
        rounds.append(keys)
        start = len(measured)
        for i in reversed(range(1, len(batch))):  # the first never compiles
            yield i
            assert measured[-1] == keys[i] and len(measured) == start + len(batch) - i
        if len(rounds) > 1:
            assert keys[0] not in measured[start:]  # never yielded: not measured in its round

    res = tune.search([("a", DEFAULT, SPACE)], measure, budget_s=1e9, clock=FakeClock(), prepare=prepare)
    first = rounds[0]
    assert measured[: len(first)] == first[1:][::-1] + first[:1]  # the default last, though never yielded
    assert len(rounds) > 2
    assert res["measured"] == len(measured)


def test_tune_modules_skips_close_timing_of_hopeless_schedules(monkeypatch):
    """A schedule whose probe run is over SLOW times the best so far (and
    over 1 ms) keeps its probe time; the others are timed with graphs. Wrong
    results are infeasible. (CPU: the two timings are stand-ins.)"""
    import torch

    class Mod:
        CONFIG_SPACE = {"BLOCK_m": [1, 2, 4, 8, 16, 32, 64, 128], "num_warps": [4]}
        DEFAULT_CONFIG = {"BLOCK_m": 64, "num_warps": 4}

        @staticmethod
        def run(x, config=None):
            return x * (3 if config["BLOCK_m"] == 2 else 2)  # BLOCK_m=2 computes a wrong result

    cost = lambda cfg: 100.0 * 64 / cfg["BLOCK_m"]  # noqa: E731  (1 us per element of work)
    current, graphed = {}, []

    def fake_graph(run, inputs, rep=20):
        graphed.append(current["cfg"])
        return cost(current["cfg"])

    def fake_event(fn):
        fn()
        return 1.05 * cost(current["cfg"])

    monkeypatch.setattr(tune, "graph_time_us", fake_graph)
    monkeypatch.setattr(tune, "event_us", fake_event)
    real_run = Mod.run

    def run(x, config=None):
        current["cfg"] = dict(config)
        return real_run(x, config)

    Mod.run = staticmethod(run)
    x = torch.ones(4)
    res = tune.tune_modules([("m", None, Mod, "")], [x], [x * 2], budget_s=1e9, cuda=False, first=8)
    assert res["config"]["BLOCK_m"] == 128 and res["time_us"] == pytest.approx(50.0)
    times = {c["BLOCK_m"]: t for _, c, t in res["trace"]}
    assert times[2] is None and any("relative L2" in f for f in res["failures"])
    # BLOCK_m=1: a 6720 us probe against a best of at most 100 us (the default's): not graph-timed
    assert 1 not in [c["BLOCK_m"] for c in graphed] and times[1] == pytest.approx(1.05 * 6400)
    assert {64, 128} <= {c["BLOCK_m"] for c in graphed}


def test_gpu_lock_excludes_other_processes(tmp_path):
    """While the tuner holds the pool's GPU lock no worker can take it (a
    worker runs a schedule only under it); it is free again after."""
    import subprocess

    from efir import tune_pool

    path = str(tmp_path / "gpu.lock")
    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\nexcept OSError:\n    print('held')")
    take = lambda: subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True).stdout.strip()  # noqa: E731
    with tune_pool.gpu_lock(path):
        assert take() == "held"
    assert take() == "free"
    with tune_pool.gpu_lock(None):  # no lock file: no lock (the CPU interpreter)
        assert take() == "free"


def test_confirm_retimes_the_best_and_the_default_side_by_side():
    # The default was timed first, on a cold GPU (20 us); re-timed it is
    # the fastest (10 us), so the tuned result is never slower than it.
    first = {"BLOCK_m": 16}
    other = {"BLOCK_m": 32}
    res = {"name": "b", "config": other, "time_us": 12.0,
           "trace": [("a", first, 20.0), ("b", other, 12.0), ("b", {"BLOCK_m": 64}, None)]}
    seen = []

    def timer(name, mod, cfg, run):
        seen.append((name, cfg["BLOCK_m"]))
        return {("a", 16): 10.0, ("b", 32): 12.0}[(name, cfg["BLOCK_m"])]

    tune.confirm(res, "a", first, {"a": None, "b": None}, [], timer=timer)
    assert (res["name"], res["config"], res["time_us"]) == ("a", first, 10.0)
    # Both twice, in turn; the incorrect schedule never.
    assert seen == [("b", 32), ("a", 16)] * 2
    assert set(res["confirmed"].values()) == {10.0, 12.0}
    # A search whose best is the default already keeps it.
    res = {"name": "a", "config": first, "time_us": 10.0, "trace": [("a", first, 10.0)]}
    tune.confirm(res, "a", first, {"a": None}, [], timer=timer)
    assert res["name"] == "a" and "confirmed" not in res


def test_worker_probe_times_a_loading_first_run_again():
    """The compile worker's probe: a first launch that took over
    PROBE_AGAIN_US (its kernels' binaries loading) is timed once more and
    the second time counts; a fast first run, or one slow past any loading
    cost, is timed once. (Session 41: every three-kernel attn_decode
    candidate probed at 1.1-2 ms, measured at 33 us.)"""
    from efir import tune_pool

    def runs(times):
        calls = []

        def timed_run():
            calls.append(len(calls))
            return f"out{len(calls)}", times[len(calls) - 1]

        return calls, timed_run

    calls, f = runs([1300.0, 33.0])
    assert tune_pool._probe(f) == ("out2", 33.0) and len(calls) == 2
    calls, f = runs([40.0, 1.0])
    assert tune_pool._probe(f) == ("out1", 40.0) and len(calls) == 1
    calls, f = runs([2.0 * tune_pool.PROBE_ONCE_US, 1.0])
    assert tune_pool._probe(f) == ("out1", 2.0 * tune_pool.PROBE_ONCE_US) and len(calls) == 1


def test_split_k_start_is_the_measured_best_shape_and_round_0_measures_it():
    """A split-K module (its kernels stream their split in sub-blocks,
    `SUB_<axis>=min(cfg.get("BLOCK_<axis>__k<i>", ...))`) starts the search
    also from 1024-blocks of the split by 64, rows of a dim of at most 16
    at 16, 3 stages (lora B=1's best schedule on the H100, session 41); a
    module without one has no such start; round 0 measures the start right
    after the default."""
    default = {"BLOCK_k": 64, "BLOCK_g0_0": 1, "BLOCK_g0_1": 128, "BLOCK_n": 32, "num_warps": 4, "num_stages": 2, "BLOCK_k__k0": 64}
    space = {"BLOCK_k": [16, 64, 256, 1024], "BLOCK_g0_0": [1, 16], "BLOCK_g0_1": [16, 128], "BLOCK_n": [16, 32],
             "num_warps": [2, 4, 8], "num_stages": [1, 2, 3, 4], "BLOCK_k__k0": [16, 64, 256, 1024]}
    src = 'x[(1,)](a, SUB_k=min(cfg.get("BLOCK_k__k0", block_k), block_k), b)\n'
    start = tune.split_k_start(default, space, src)
    assert start == {**default, "BLOCK_k": 1024, "BLOCK_k__k0": 64, "BLOCK_g0_0": 16, "num_stages": 3}
    assert tune.split_k_start(default, space, "no split here") is None
    assert tune.split_k_start(default, {**space, "BLOCK_k": [16, 64]}, src) is None

    seen = []

    def measure(name, cfg):
        seen.append(dict(cfg))
        return 10.0 if cfg == start else 20.0

    res = tune.search([("m", default, space)], measure, budget_s=1e9, first=4, starts={"m": [start]}, halve=False)
    assert seen[0] == default and seen[1] == start
    assert res["config"] == start and res["time_us"] == 10.0
