"""Saying that records were lost where the user sees it, whether or not their program configured logging.

The library's logger has only a NullHandler until the application adds handlers, so an ERROR logged at
interpreter exit by a script that never configured logging reaches nobody, and the script exits 0. Data loss
is logged as usual and, unless a handler already writes it to stderr, written to stderr directly: once.
"""

from __future__ import annotations

import logging
import sys


def reaches_stderr(logger: logging.Logger, level: int) -> bool:
    """Whether a record at `level` on `logger` is written to stderr by one of the handlers it reaches."""
    if not logger.isEnabledFor(level):
        return False
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            stream = getattr(handler, "stream", None)
            if (isinstance(handler, logging.StreamHandler) and stream in (sys.stderr, sys.__stderr__)
                    and level >= handler.level):
                return True
        current = current.parent if current.propagate else None
    return False


def report_loss(logger: logging.Logger, message: str) -> None:
    """Log `message` at ERROR, and write it to stderr if no handler does."""
    logger.error(message)
    if not reaches_stderr(logger, logging.ERROR):
        try:
            print(f"kafkajet: ERROR: {message}", file=sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr closed at exit: the log record was all that could be done
            pass
