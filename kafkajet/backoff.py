"""Exponential backoff with jitter, as Kafka's org.apache.kafka.common.utils.ExponentialBackoff: the one backoff of
the network client, the blocking bootstrap, token refresh, the admin client and the producer."""

from __future__ import annotations

import math
import random


class ExponentialBackoff:
    """initial * multiplier**attempts, never above max_ms, each value scaled by a random factor 1 ± jitter.

    The exponent stops growing once the un-jittered value reaches max_ms, so jitter still spreads retries
    of many clients at the cap instead of all of them sitting exactly on max_ms.
    """

    __slots__ = ("initial_ms", "multiplier", "max_ms", "jitter", "_exp_max", "_rng")

    def __init__(
        self,
        initial_ms: float,
        multiplier: float,
        max_ms: float,
        jitter: float,
        rng: random.Random | None = None,
    ) -> None:
        self.initial_ms = float(initial_ms)
        self.multiplier = float(multiplier)
        self.max_ms = float(max_ms)
        self.jitter = float(jitter)
        if self.max_ms > self.initial_ms and self.multiplier > 1:
            self._exp_max = math.log(self.max_ms / max(self.initial_ms, 1.0)) / math.log(self.multiplier)
        else:
            self._exp_max = 0.0
        self._rng = rng or random.Random()

    def backoff(self, attempts: int) -> float:
        if self._exp_max == 0:
            return self.initial_ms
        term = self.initial_ms * self.multiplier ** min(float(attempts), self._exp_max)
        factor = self._rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter > 0 else 1.0
        return min(term * factor, self.max_ms)
