"""Watching the producer make its RecordFutures, in either build."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kafkajet.producer.futures import RecordFuture


def on_future_made(monkeypatch: pytest.MonkeyPatch, made: Callable[[], None]) -> None:
    """Call made() each time a RecordFuture is made. record_future() makes one without calling __init__, setting
    its attributes (its batch first, as __init__ does), so the class's __setattr__ is what sees every future. The
    patch goes on the class itself: the compiled build holds the class in a C static, which a module attribute
    patch would not reach."""

    def watched(self: RecordFuture, name: str, value: Any) -> None:
        if name == "_batch":
            made()
        object.__setattr__(self, name, value)

    monkeypatch.setattr(RecordFuture, "__setattr__", watched)
