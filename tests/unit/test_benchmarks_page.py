"""The Benchmarks page opens with the comparison and how to reproduce it, not with a goal-tracking table, and its
summary quotes the run it summarises (a figure re-measured below without the summary following would drift)."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def _sections() -> list[tuple[str, str]]:
    parts = re.split(r"^## (.+)$", PAGE.read_text(), flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_the_page_opens_with_the_comparison_and_how_to_reproduce_it() -> None:
    (title, body), (next_title, next_body) = _sections()[:2]
    assert title == "The comparison"
    header = next(line for line in body.splitlines() if line.startswith("| "))
    assert "goal" not in header and "met" not in header, header
    assert "make kafka" in body and "benchmarks/targets.py" in body
    assert "goal" in next_body  # the goal-tracking table comes after, as the run behind the figures


def test_the_comparisons_figures_are_the_runs() -> None:
    sections = dict(_sections())
    summary, run = sections["The comparison"], sections["On Apache Kafka: the targets behind the comparison"]
    rows = [line for line in summary.splitlines() if line.startswith("| ") and not line.startswith(("| workload",
                                                                                                     "| ---"))]
    assert len(rows) >= 10
    for row in rows:
        figures = re.findall(r"\d[\d,.]*(?:/s| MB/s| ms| rows/s)", row)
        assert figures, row
        for figure in figures:
            assert figure in run, f"{figure} (from the comparison's row {row!r}) is not in the run it summarises"
