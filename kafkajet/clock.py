"""The one clock: milliseconds on a monotonic scale, as every part of the client measures deadlines.

Code that waits takes `now` (or a clock callable defaulting to `now_ms`) rather than reading time itself, so
the sender, accumulator and metadata are driven deterministically in tests, as Java's MockTime does.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

Clock = Callable[[], float]

# Final: compiled, a C static; `time.x` would be a module attribute look-up per call (per send(), for wall_ms).
_monotonic: Final = time.monotonic
_time_ns: Final = time.time_ns


def now_ms() -> float:
    """Monotonic milliseconds: only differences mean anything."""
    return _monotonic() * 1000.0


def wall_ms() -> int:
    """Wall-clock milliseconds since the epoch, for record timestamps."""
    return _time_ns() // 1_000_000
