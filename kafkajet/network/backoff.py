"""The producer's compiled modules' import path of kafkajet.backoff.ExponentialBackoff (the accumulator and
the metadata import it from here); new code imports kafkajet.backoff, below both network and security."""

from kafkajet.backoff import ExponentialBackoff

__all__ = ["ExponentialBackoff"]
