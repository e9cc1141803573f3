"""Messages a user must see before configuring logging.

kafkajet's logger holds a NullHandler (kafkajet/__init__.py) so that its routine warnings stay quiet until the
application configures logging; that also hides Python's last-resort stderr handler. A few messages are about
the caller's own mistake or request (a raising callback, a topic that is not what create_topics() asked for):
those go, while no handler but that NullHandler would take them, to the last resort, as they would without
the NullHandler, and through the application's handlers otherwise (never both).
"""

from __future__ import annotations

import logging
from typing import Any


def configured(logger: logging.Logger) -> bool:
    """Whether a record on `logger` reaches a handler other than the library's own NullHandler (Python's rule
    for using the last resort: no handler at all on the way up)."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(not (current.name == "kafkajet" and isinstance(h, logging.NullHandler)) for h in current.handlers):
            return True
        current = current.parent if current.propagate else None
    return False


def log_even_unconfigured(logger: logging.Logger, level: int, msg: str, *args: Any, exc_info: Any = None) -> None:
    """logger.log(level, msg, *args), or straight to Python's last-resort handler (stderr) while the
    application has configured no logging."""
    if not logger.isEnabledFor(level):
        return
    if configured(logger):
        logger.log(level, msg, *args, exc_info=exc_info, stacklevel=2)
        return
    last_resort = logging.lastResort
    if last_resort is not None and level >= last_resort.level:
        if exc_info is True:
            import sys

            exc_info = sys.exc_info()
        last_resort.handle(logger.makeRecord(logger.name, level, __file__, 0, msg, args, exc_info))
