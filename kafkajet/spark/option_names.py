"""The names of the source's and the sink's options, and the one check of what a query passed against them.

Spark hands a data source its options lower-cased ("exactlyonce"), while users write and the README documents
them in camelCase ("exactlyOnce"). Names are compared case-insensitively, and a misspelt one is refused with
the closest known name in its documented spelling: a typo must never turn into a silently different query
(a misspelt exactlyOnce would write at-least-once without a word).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from kafkajet.errors import ConfigError

# Options Spark itself adds to what the user passed: `path` (load(path) / save(path)), and for streams the
# query's name and checkpoint.
SPARK_ADDED = ("path", "queryName", "checkpointLocation")


@dataclass(frozen=True)
class OptionNames:
    """One side's options as documented; `kafka` holds the kafka.* settings it takes (prefix included)."""

    side: str  # "source" or "sink": named in the messages
    names: tuple[str, ...]
    kafka: Collection[str]
    summary: str  # what the side takes, for the message about an unknown name

    def spelled(self, key: str) -> str:
        """The documented spelling of an option Spark passed lower-cased (the key itself if unknown)."""
        return _documented(self.names).get(key.lower(), key)

    def check(self, options: Mapping[str, str]) -> None:
        """Every option a known one (case-insensitively); else a ConfigError with the closest name."""
        names = (*self.names, *SPARK_ADDED)
        known = _documented(names)
        for key in options:
            lower = key.lower()
            if lower.startswith("kafka."):
                if lower not in self.kafka:
                    raise self._unknown(key, self.kafka)
            elif lower not in known:
                raise self._unknown(key, names)

    def _unknown(self, key: str, candidates: Iterable[str]) -> ConfigError:
        close = closest(key, candidates)
        hint = f"; did you mean '{close}'?" if close else "."
        if close and key == key.lower() and close != close.lower():
            # Not the user's spelling: Spark lower-cases option names before a Python data source sees them.
            hint += " (Spark passes option names lower-cased.)"
        return ConfigError(f"unknown option '{key}' for the kafkajet {self.side}{hint} It takes {self.summary}.")


def closest(key: str, names: Iterable[str]) -> str | None:
    """The known name nearest to `key` ignoring case, in its own spelling; None when nothing is near."""
    by_lower = _documented(names)
    found = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def _documented(names: Iterable[str]) -> dict[str, str]:
    return {n.lower(): n for n in names}
