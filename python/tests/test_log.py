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


def test_unset_or_unknown_efir_log(fresh, monkeypatch, caplog):
    assert log.configure() is None and fresh.handlers == []
    monkeypatch.setenv("EFIR_LOG", "loud")
    with caplog.at_level(logging.WARNING, logger="efir"):
        assert log.configure() is None and fresh.handlers == []
    # a WARNING record of the efir logger (printed by logging's last resort
    # where nothing is configured)
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.WARNING, "efir: EFIR_LOG='loud' is not one of debug, info, warn, error; ignored") in said, said


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


def test_shown_prints_info_for_the_while(fresh, capsys):
    lg = logging.getLogger("efir")
    lg.info("hidden before")
    with log.shown():
        lg.info("efir: a stage done in 1.00 s")
        lg.debug("still hidden")
    lg.info("hidden after")
    assert capsys.readouterr().err == "efir: INFO: a stage done in 1.00 s\n"
    assert fresh.handlers == [] and fresh.level == logging.NOTSET and fresh.propagate
    with log.shown(enabled=False):
        lg.info("not asked for")
    assert capsys.readouterr().err == ""
    # EFIR_LOG=warn: its handler lowered for the while (nothing printed twice)
    log.configure("warn")
    with log.shown():
        lg.info("once")
        lg.warning("a warning, once")
    lg.info("hidden again")
    assert capsys.readouterr().err == "efir: INFO: once\nefir: WARNING: a warning, once\n"
    assert len(fresh.handlers) == 1 and fresh.level == logging.WARNING and fresh.handlers[0].level == logging.WARNING
    # EFIR_LOG=debug: shown already, nothing changes
    log.configure("debug")
    with log.shown():
        assert fresh.level == logging.DEBUG


def test_working_draws_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with log.working("saturate + compact") as b:
        pass
    assert sys.stderr.getvalue() == "" and isinstance(b, log._NoBar)
    pytest.importorskip("tqdm")
    monkeypatch.setattr(log, "interactive", lambda: True)
    import time

    with log.working("saturate + compact", every=0.01):
        time.sleep(0.1)
    drawn = sys.stderr.getvalue()
    assert "efir: saturate + compact: 00:00" in drawn and drawn.count("\r") >= 3, repr(drawn)
    assert not [t for t in __import__("threading").enumerate() if t.name == "efir-progress"]


def test_log_lines_are_written_around_a_bar(fresh, monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setattr(log, "interactive", lambda: True)
    with log.shown(), log.bar("check", total=2, unit="candidate") as b:
        b.update(1)
        logging.getLogger("efir").info("chose @p")
        b.update(1)
    out = sys.stderr.getvalue()
    # the bar is cleared (a blank run ending in \r) before the line, which
    # is a line of its own, and drawn again after it
    before, after = out.split("efir: INFO: chose @p\n")
    assert before.endswith("\r") and before.rstrip("\r").endswith(" "), repr(out)
    assert after.startswith("\refir: check:") and "1/2" in after, repr(out)
