"""The old name of sink_options.py (the sink's options), kept so that existing imports work."""

from kafkajet.spark.sink_options import REJECTED, SINK_OPTIONS, producer_config

__all__ = ["REJECTED", "SINK_OPTIONS", "producer_config"]
