"""docs/settings.md is the producer's config table as Markdown, generated (`python -m kafkajet.config >
docs/settings.md`): a key added to the table, or a default or description changed, without regenerating the
page fails here, so the page never lags the table it documents."""

from __future__ import annotations

from pathlib import Path

from kafkajet.config import JAVA_NAMES, PRODUCER_CONFIG, settings_page

PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
REGENERATE = "regenerate it: python -m kafkajet.config > docs/settings.md"


def test_every_producer_key_has_a_line_on_the_settings_page() -> None:
    lines = PAGE.read_text().splitlines()
    for key in PRODUCER_CONFIG:
        rows = [row for row in lines if row.startswith(f"| `{key.name}` |")]
        assert len(rows) == 1, f"docs/settings.md has no line for {key.name}: {REGENERATE}"
        assert f" `{key.name}` | {key.type} |" in rows[0] and key.doc in rows[0], rows[0]


def test_the_committed_page_is_the_generated_one() -> None:
    assert PAGE.read_text() == settings_page(), f"docs/settings.md differs from the config table: {REGENERATE}"


def test_keys_that_are_not_javas_say_what_java_calls_them() -> None:
    page = PAGE.read_text()
    assert "| `partitioner` | object | `default` | `partitioner.class`" in page
    assert "| `linger.ms` | int | `5` | same |" in page
    assert "| `ssl.certificate.pem` | str | `None` | `ssl.keystore.certificate.chain`" in page
    assert all(f"| `{name}` |" in page for name in JAVA_NAMES)
