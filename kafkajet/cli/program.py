"""The name the user invoked the command line by, for usage lines and messages."""

from __future__ import annotations

import os
import sys


def program_name() -> str:
    """`kafkajet` for the console script, `python -m kafkajet` for the module: what the user typed."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "kafkajet"
    return "python -m kafkajet" if name in ("__main__.py", "-c", "") else name
