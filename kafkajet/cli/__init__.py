"""The command line (`kafkajet ...` or `python -m kafkajet ...`): one module per command family."""

from kafkajet.cli.main import main

__all__ = ["main"]
