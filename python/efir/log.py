"""efir's Python logging and progress output, configured in one place.

- The `efir` logger (and its children) carries what a compile notes on the
  way: limits reached and skipped candidates (DEBUG), one-off notes such as
  "tuning skipped" and each new shape the torch.compile backend compiles
  for (INFO), and problems (WARNING). `EFIR_LOG=debug|info|warn|error` (or
  `python -m efir --verbose`) sends records of that level and above to
  stderr as `efir: LEVEL: message`; without it Python's defaults apply
  (only WARNING and above, printed by the last-resort handler), so a
  successful compile prints nothing.
- `bar(...)`: a tqdm progress bar on stderr for long steps (tuning,
  compiling many candidates), drawn only when stderr is a terminal and
  tqdm is installed; otherwise a stand-in that draws nothing.
"""

import logging
import os
import sys

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}

logger = logging.getLogger("efir")
_HANDLER = None


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
        print(f"efir: EFIR_LOG={name!r} is not one of {', '.join(k for k in LEVELS if k != 'warning')}; ignored", file=sys.stderr)
        return None
    if _HANDLER is None:
        _HANDLER = logging.StreamHandler(sys.stderr)
        _HANDLER.setFormatter(_Formatter("efir: %(levelname)s: %(message)s"))
        logger.addHandler(_HANDLER)
        logger.propagate = False  # printed once, not again by a root handler
    _HANDLER.setLevel(lvl)
    logger.setLevel(lvl)
    return lvl


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


def bar(desc, total=None, unit="it", enabled=True):
    """A progress bar on stderr (tqdm), only when `enabled`, stderr is a
    terminal and tqdm is installed; else a stand-in that draws nothing.
    Use as a context manager or close it."""
    if not enabled or not interactive():
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(desc=f"efir: {desc}", total=total, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)
