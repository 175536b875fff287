"""efir's Python logging and progress output, configured in one place.

- The `efir` logger (and its children) carries what a compile notes on the
  way: limits reached and skipped candidates (DEBUG), one-off notes such as
  "tuning skipped" and each new shape the torch.compile backend compiles
  for (INFO), and problems (WARNING). `EFIR_LOG=debug|info|warn|error` (or
  `python -m efir --verbose`) sends records of that level and above to
  stderr as `efir: LEVEL: message`; without it Python's defaults apply
  (only WARNING and above, printed by the last-resort handler), so a
  successful compile prints nothing.
- `shown(enabled)`: the `efir` logger's INFO records on stderr for a
  while, where they are not shown already: `efir.compile` asks for them
  (its stages and how long they took) on a terminal, or with quiet=False.
- `bar(...)`: a tqdm progress bar on stderr for long steps (tuning,
  compiling many candidates), drawn only when stderr is a terminal and
  tqdm is installed; otherwise a stand-in that draws nothing. `working(...)`:
  the same for a step without counts (elapsed time, refreshed meanwhile).

The Python package writes its progress and debug output only through these
(the command line's results and `error:` lines aside).
"""

import contextlib
import functools
import logging
import os
import sys
import threading

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}

logger = logging.getLogger("efir")
_HANDLER = None


class _Handler(logging.StreamHandler):
    """A stderr handler that writes around a progress bar being drawn
    (tqdm.write: the bar is cleared, the line written, the bar redrawn)."""

    def emit(self, record):
        if not _DRAWN:
            return super().emit(record)
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 (as logging.Handler.emit: reported, never raised)
            self.handleError(record)


# Progress bars drawn now (`bar`); log lines are written around them.
_DRAWN = []


class _Formatter(logging.Formatter):
    """`efir: LEVEL: message`, without the `efir: ` that some messages
    start with (they are also printed or warned as they are)."""

    def formatMessage(self, record):  # noqa: N802 (logging's name)
        record.message = record.message.removeprefix("efir: ")
        return super().formatMessage(record)


def configure(level=None):
    """Configure the `efir` logger once: `level` (a name of LEVELS), else
    `$EFIR_LOG`; nothing when neither is set. An unknown name is reported
    on stderr and ignored. Calling it again changes the level only (one
    handler). Returns the level set, or None."""
    global _HANDLER
    name = level if level is not None else os.environ.get("EFIR_LOG", "")
    name = name.strip().lower()
    if not name:
        return None
    lvl = LEVELS.get(name)
    if lvl is None:
        logger.warning("efir: EFIR_LOG=%r is not one of %s; ignored", name, ", ".join(k for k in LEVELS if k != "warning"))
        return None
    if _HANDLER is None:
        _HANDLER = _Handler(sys.stderr)
        _HANDLER.setFormatter(_Formatter("efir: %(levelname)s: %(message)s"))
        logger.addHandler(_HANDLER)
        logger.propagate = False  # printed once, not again by a root handler
    _HANDLER.setLevel(lvl)
    logger.setLevel(lvl)
    return lvl


@contextlib.contextmanager
def shown(enabled=True):
    """Inside, the `efir` logger's INFO records are printed on stderr (as
    `efir: INFO: message`), unless not `enabled` or they are already shown
    or handled at INFO (EFIR_LOG=info/debug, or an application's logging
    configuration): the handler of `configure` at a higher level is lowered
    for the while, else one is added for the while."""
    if not enabled or logger.isEnabledFor(logging.INFO):
        yield
        return
    saved = (logger.level, logger.propagate)
    if _HANDLER is not None:
        handler, added, level = _HANDLER, False, _HANDLER.level
    else:
        handler, added, level = _Handler(sys.stderr), True, None
        handler.setFormatter(_Formatter("efir: %(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False  # printed once, not again by a root handler
    handler.setLevel(logging.INFO)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        if added:
            logger.removeHandler(handler)
        else:
            handler.setLevel(level)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def interactive():
    """Whether stderr is a terminal (progress bars are drawn only then)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


class _NoBar:
    """What `bar` returns when it draws nothing: the same methods, no output."""

    n = 0

    def update(self, n=1):
        self.n += n

    def set_postfix_str(self, s, refresh=True):
        pass

    def set_description_str(self, s, refresh=True):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@functools.cache
def _bar_class():
    """tqdm's bar, registered in _DRAWN while drawn (made on first use:
    tqdm is optional)."""
    from tqdm import tqdm

    class Bar(tqdm):
        """A tqdm bar that the log handler writes around while it is drawn."""

        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            _DRAWN.append(self)

        def close(self):
            if self in _DRAWN:
                _DRAWN.remove(self)
            super().close()

    return Bar


def bar(desc, total=None, unit="it", enabled=True, **tqdm_options):
    """A progress bar on stderr (tqdm), only when `enabled`, stderr is a
    terminal and tqdm is installed; else a stand-in that draws nothing.
    Use as a context manager or close it."""
    if not enabled or not interactive():
        return _NoBar()
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return _NoBar()
    return _bar_class()(desc=f"efir: {desc}", total=total, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True, **tqdm_options)


@contextlib.contextmanager
def working(desc, enabled=True, every=0.25):
    """While inside, a progress indicator for a step without counts (its
    elapsed time, refreshed every `every` seconds by a thread: the native
    stages release the GIL) on stderr, drawn as `bar` draws: only when
    `enabled`, stderr is a terminal and tqdm is installed."""
    b = bar(desc, unit="s", enabled=enabled, bar_format="{desc}: {elapsed}")
    if isinstance(b, _NoBar):
        yield b
        return
    stop = threading.Event()

    def tick():
        while not stop.wait(every):
            b.refresh()

    t = threading.Thread(target=tick, name="efir-progress", daemon=True)
    t.start()
    try:
        yield b
    finally:
        stop.set()
        t.join()
        b.close()
