"""`python -m efir report`: the table of a committed bench/gpu/run.py results
file (checked against the Markdown table run.py wrote for the same run),
the chart as a PNG, and clear errors."""

import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from efir import report  # noqa: E402
from efir.__main__ import main as cli  # noqa: E402

RESULTS = ROOT / "bench" / "results"
RUNS = ["2026-12-01-s21-h200-b8", "2026-12-01-s21-h200-attn"]


def _md_rows(path):
    """run.py's Markdown table: {(workload, B): cells}."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[1].isdigit():
            rows[(cells[0], int(cells[1]))] = cells
    return rows


@pytest.mark.parametrize("run", RUNS)
def test_table_agrees_with_run_py_markdown(run):
    res = report.load(RESULTS / f"{run}.json")
    md = _md_rows(RESULTS / f"{run}.md")
    text = report.table(res)
    lines = text.splitlines()
    assert lines[0] == "NVIDIA H200, torch 2.11.0+cu130, Triton 3.6.0, 2026-12-01"
    assert lines[2].split() == ["workload", "B", "efir", "(us)", "kernels", "best", "peer", "peer", "(us)", "speedup", "floor", "(us)", "efir/floor"]
    body = [l.split() for l in lines[4:] if l and not l.startswith("Geometric")]
    assert len(body) == len(md) == len(res["results"])
    for cells in body:
        # workload B efir kernels peer peer_us speedup floor efir/floor
        w, b, efir_us, kernels, peer, peer_us, speedup, floor, at_floor = cells
        m = md[(w, int(b))]
        assert [efir_us, kernels, peer, peer_us, speedup, floor, at_floor] == [m[3], m[4], m[6], m[7], m[8], m[2], m[9]], (cells, m)
    summary = next(l for l in (RESULTS / f"{run}.md").read_text().splitlines() if l.startswith("Geometric mean"))
    assert lines[-1] == summary


def test_markdown_table_and_cli(capsys):
    path = RESULTS / f"{RUNS[0]}.json"
    assert cli(["report", str(path), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| rmsnorm_mlp | 8 | 133.9 | 3 | compile | 50.3 | 0.38x | 42.2 | 0.32 |" in out, out


def test_not_a_results_file_is_a_clear_error(tmp_path, capsys):
    cpu = next(RESULTS.glob("*compaction*-cpu.json"))  # a list: the CPU benchmark's schema
    with pytest.raises(report.ReportError, match=r"is not a bench/gpu/run.py results file: no `results` list"):
        report.load(cpu)
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": [{"workload": "x"}]}')
    with pytest.raises(report.ReportError, match=r"results\[0\] has no `B`"):
        report.load(bad)
    bad.write_text("{")
    with pytest.raises(report.ReportError, match="is not JSON"):
        report.load(bad)
    assert cli(["report", str(tmp_path / "missing.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read"), err


def test_failed_and_partial_cases():
    res = {
        "gpu": "G",
        "results": [
            {"workload": "a", "B": 1, "error": "boom"},
            {"workload": "b", "B": 2, "efir": [{"ok": False}], "peers": {"eager": {"ok": True, "time_us": 4.0}}, "floor_us": 1.0},
            {"workload": "c", "B": 3, "efir": [{"ok": True, "time_us": 2.0, "kernels": 1}, {"ok": True, "time_us": 1.0, "kernels": 2}], "peers": {"eager": {"ok": True, "time_us": 4.0}, "compile": {"ok": False, "time_us": 0.1}}, "floor_us": 0.5},
        ],
    }
    rows = {r["workload"]: r for r in report.rows(res)}
    assert rows["a"]["error"] == "boom" and rows["b"]["efir_us"] is None
    # the fastest correct candidate; a peer that was not correct does not count
    assert rows["c"]["efir_us"] == 1.0 and rows["c"]["kernels"] == 2 and rows["c"]["peer"] == "eager" and rows["c"]["speedup"] == 4.0
    text = report.table(res)
    assert "error: boom" in text and "none correct" in text
    assert text.splitlines()[-1] == "Geometric mean speedup over the best peer: 4.00x over 1 cases; efir ahead of the best peer in 1 of 1."


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_matplotlib() and os.environ.get("EFIR_REQUIRE_MATPLOTLIB") != "1", reason="matplotlib is not installed")
def test_chart_is_a_png(tmp_path):
    out = tmp_path / "plot.png"
    assert cli(["report", str(RESULTS / f"{RUNS[1]}.json"), "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_chart_without_matplotlib_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    assert cli(["report", str(RESULTS / f"{RUNS[0]}.json"), "-o", str(tmp_path / "p.png")]) == 1
    cap = capsys.readouterr()
    assert "rmsnorm_mlp" in cap.out  # the table is still printed
    assert "needs matplotlib, which is not installed (pip install matplotlib)" in cap.err
    assert not (tmp_path / "p.png").exists()
