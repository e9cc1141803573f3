"""What a user's type checker sees: the package ships py.typed, and the lazily loaded clients still type."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USER_SCRIPT = '''
from kafkajet import Admin, Producer, RecordMetadata

def deliver(servers: str) -> RecordMetadata:
    with Producer({"bootstrap.servers": servers}) as p:
        return p.send("events", value=b"v").result(timeout=30)

wrong_producer: int = Producer
wrong_admin: int = Admin
'''


def test_mypy_types_the_public_names_in_a_user_script(tmp_path: Path) -> None:
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    # Run outside the repository so mypy finds kafkajet as users do: the installed package and its py.typed.
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                          "--follow-imports=silent", str(script)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    lines = [line for line in out.stdout.splitlines() if "user.py" in line]
    # The two planted mistakes are reported with the real classes (a lazy __getattr__ alone would say "object"),
    # and nothing else: deliver() type-checks against the real send()/result() signatures.
    assert len(lines) == 2, out.stdout + out.stderr
    assert 'type "type[Producer]"' in lines[0], lines
    assert 'type "type[Admin]"' in lines[1], lines


def test_the_package_ships_its_py_typed_marker() -> None:
    import kafkajet

    assert (Path(kafkajet.__file__).parent / "py.typed").is_file()


def test_the_types_users_meet_come_from_one_place() -> None:
    import kafkajet
    from kafkajet import NewTopic, PartitionInfo, Record, RecordMetadata, TopicPartition

    assert {c.__name__ for c in (NewTopic, PartitionInfo, Record, RecordMetadata, TopicPartition)} <= set(kafkajet.__all__)
    tp = TopicPartition("orders", 3)
    assert (tp.topic, tp.partition) == ("orders", 3)
    assert {("orders", 3): 42}[tp] == 42  # the same key as the plain tuple the client uses inside
