"""What a terminal gives a command it runs in the foreground, for the tests that press Ctrl-C."""

from __future__ import annotations

import signal


def default_ctrl_c() -> None:
    """`preexec_fn`: SIGINT and SIGQUIT back to their defaults in the child, as an interactive shell gives a
    foreground job. A suite started in the background without job control (`make test &` in a script) ignores
    both, a child inherits that, and a Ctrl-C never reaches the command: the Ctrl-C tests then waited out their
    timeouts (perf, `kafkajet broker`) though nothing in kafkajet was wrong."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
