"""The site's pages read as whole text: every paragraph starts as a sentence starts and ends as one ends.

When the README's sections moved into docs/, three pages lost a line at a cut: a section that began
mid-sentence ("arguments mean the same, ..."), another that began with the tail of a paragraph moved elsewhere,
and a paragraph that stopped at "so adding a nullable column stays" before the next heading. `mkdocs build
--strict` sees none of this; a page does not render wrongly, it just reads wrongly.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("**/*.md"))

# A sentence starts with a capital, a digit, inline code or markup (a heading, list item, table row, quote,
# link, image, emphasis, HTML, an admonition); "kafkajet", the project's name, is written in lower case.
_STARTS = re.compile(r"([A-Z0-9`#|>*_\[!<-]|:::|\$ |kafkajet\b)")
# ...and ends with a full stop, a colon before what it introduces, a closing bracket, code or markup.
_ENDS = re.compile(r"[.:!?)\]`*|>]$")


def paragraphs(text: str) -> list[tuple[int, list[str], bool]]:
    """(first line number, lines, follows a code block) of each block of lines between blank lines, outside
    fenced code."""
    blocks: list[tuple[int, list[str], bool]] = []
    lines: list[str] = []
    first = 0
    in_fence = after_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            if lines:
                blocks.append((first, lines, after_fence))
                lines = []
            in_fence = not in_fence
            after_fence = True
            continue
        if in_fence:
            continue
        if not line.strip():
            if lines:
                blocks.append((first, lines, after_fence))
                lines = []
                after_fence = False
            continue
        if not lines:
            first = number
        lines.append(line)
    if lines:
        blocks.append((first, lines, after_fence))
    return blocks


def problems(text: str) -> list[str]:
    found = []
    for number, lines, after_code in paragraphs(text):
        start, end = lines[0].lstrip(), lines[-1].rstrip()
        # Right after a code block, a sentence may go on ("... as below:", the block, "and from Python, ...").
        if not after_code and not _STARTS.match(start):
            found.append(f"line {number} starts mid-sentence: {start[:60]!r}")
        # A heading, a table and a mkdocstrings directive (":::" and its options) end as they like.
        prose = not re.match(r"([#|]|:::)", start) and not end.lstrip().startswith("|")
        if prose and not _ENDS.search(end):
            found.append(f"line {number + len(lines) - 1} ends mid-sentence: {end[-60:]!r}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_paragraph_starts_and_ends_as_a_sentence(page: Path) -> None:
    assert problems(page.read_text()) == []


def test_the_check_sees_the_cuts_the_move_made() -> None:
    # The three cuts as they were, and what is not one: text that goes on after a code block.
    cut = ("## Configuration\n\narguments mean the same, and every key is read.\n\n"
           "A paragraph that stops at\nso adding a nullable column stays\n\n## Columns\n\n"
           "the suite; they run Apache Kafka's protocol.\n\n"
           "Read it from the shell:\n\n```\n$ kafkajet groups\n```\n\nand from Python, `Admin.x()`.\n\n"
           "kafkajet is lower case.\n")
    assert problems(cut) == [
        "line 3 starts mid-sentence: 'arguments mean the same, and every key is read.'",
        "line 6 ends mid-sentence: 'so adding a nullable column stays'",
        "line 10 starts mid-sentence: \"the suite; they run Apache Kafka's protocol.\"",
    ]
