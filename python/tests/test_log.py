"""EFIR_LOG and progress bars (efir/log.py): the `efir` logger configured
once, records printed as `efir: LEVEL: message`; bars only on a terminal."""

import io
import logging
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from efir import log  # noqa: E402


@pytest.fixture
def fresh(monkeypatch):
    """The `efir` logger as an unconfigured process has it, restored after."""
    lg = logging.getLogger("efir")
    saved = (lg.level, lg.propagate, list(lg.handlers), log._HANDLER)
    for h in list(lg.handlers):
        lg.removeHandler(h)
    lg.setLevel(logging.NOTSET)
    monkeypatch.setattr(log, "_HANDLER", None)
    monkeypatch.delenv("EFIR_LOG", raising=False)
    yield lg
    for h in list(lg.handlers):
        lg.removeHandler(h)
    lg.setLevel(saved[0])
    lg.propagate = saved[1]
    for h in saved[2]:
        lg.addHandler(h)
    log._HANDLER = saved[3]


def test_efir_log_levels(fresh, monkeypatch, capsys):
    monkeypatch.setenv("EFIR_LOG", "info")
    assert log.configure() == logging.INFO
    logging.getLogger("efir").debug("hidden")
    logging.getLogger("efir").info("efir: no CUDA inputs")  # the prefix is not doubled
    logging.getLogger("efir.tune").warning("a child logger's record")
    err = capsys.readouterr().err
    assert err == "efir: INFO: no CUDA inputs\nefir: WARNING: a child logger's record\n", err
    # configured again: the level changes, still one handler
    assert log.configure("debug") == logging.DEBUG
    logging.getLogger("efir").debug("shown")
    assert capsys.readouterr().err == "efir: DEBUG: shown\n"
    assert len(fresh.handlers) == 1
    log.configure("warn")
    logging.getLogger("efir").info("hidden again")
    assert capsys.readouterr().err == ""


def test_unset_or_unknown_efir_log(fresh, monkeypatch, capsys):
    assert log.configure() is None and fresh.handlers == []
    monkeypatch.setenv("EFIR_LOG", "loud")
    assert log.configure() is None and fresh.handlers == []
    assert "EFIR_LOG='loud' is not one of debug, info, warn, error; ignored" in capsys.readouterr().err


def test_bars_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with log.bar("tune", unit="schedule") as b:
        b.update(3)
        b.set_postfix_str("best 1.0 us")
    assert sys.stderr.getvalue() == "" and b.n == 3
    pytest.importorskip("tqdm")
    monkeypatch.setattr(log, "interactive", lambda: True)
    assert log.bar("tune", enabled=False).__class__ is log._NoBar
    with log.bar("tune", total=4, unit="schedule") as b:
        b.update(2)
    assert "efir: tune:" in sys.stderr.getvalue() and "0/4" in sys.stderr.getvalue()


def test_verbose_flag_configures_info(fresh, capsys):
    from efir.__main__ import main

    main(["-v", "report", str(ROOT / "bench" / "results" / "2026-12-01-s21-h200-b8.json")])
    assert fresh.level == logging.INFO and len(fresh.handlers) == 1
