"""The documentation: its pages (README.md, then docs/ in name order), their fenced blocks, their links, and the
figures they quote from bench/results.md.

No figure is copied by hand: a page quotes the goals table of bench/results.md between two markers,

    <!-- figures from bench/results.md: Network N2, RTT 20 ms | Scale 100 k -->
    ... (written by `make docs`)
    <!-- end of figures -->

naming the goals it shows by how their names start (`*`: every goal), and `python -m devkit.docs` (`make docs`)
writes what lies between from the results. The tests fail when a page differs from what it would write.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.md"
_FENCE = re.compile(r"^```(\w*)$")
_FIGURES = re.compile(
    r"^<!-- figures from bench/results\.md: (?P<goals>.+?) -->\n(?P<body>.*?)^<!-- end of figures -->$",
    re.MULTILINE | re.DOTALL,
)
_GOALS_HEADER = "| goal | measured | met |\n|---|---|---|\n"


def pages() -> list[Path]:
    """Every page of the documentation, in reading order: the front page, then docs/ by name."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def page(name: str) -> str:
    """One page's text, by its path from the repository's root (`README.md`, `docs/cache.md`)."""
    return (ROOT / name).read_text()


def section(text: str, heading: str) -> str:
    """The text under the heading that starts with `heading` (`## The cache source`), up to the next heading of
    its level or above; fenced blocks' lines are never taken for headings."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines(keepends=True)
    start = next(index for index, line in enumerate(lines) if line.startswith(heading))
    fenced, end = False, len(lines)
    for index in range(start + 1, len(lines)):
        if _FENCE.match(lines[index].rstrip("\n")):
            fenced = not fenced
        marks = len(lines[index]) - len(lines[index].lstrip("#"))
        if not fenced and 0 < marks <= level and lines[index][marks : marks + 1] == " ":
            end = index
            break
    return "".join(lines[start:end])


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: str  # the line before the opening fence


def blocks(text: str) -> Iterator[Block]:
    """Every fenced block of `text`, with the line just before it."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = lines.index("```", index + 1)
        yield Block(index + 1, opening[1], "\n".join(lines[index + 1 : end]) + "\n", lines[index - 1] if index else "")
        index = end + 1


def first_block(text: str, language: str) -> str:
    """The code of the first ```language block of `text`."""
    return next(block.code for block in blocks(text) if block.language == language)


def rows(text: str) -> list[list[str]]:
    """The cells of every row of the tables in `text`, their header and separator rows left out."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    found = []
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if not line.startswith("|---") and not following.startswith("|---"):
            found.append([cell.strip() for cell in re.split(r"\s\|(?=\s)", line.strip().strip("|"))])
    return found


def prose(text: str) -> str:
    """`text` without its fenced blocks and its generated figures: what was written by hand."""
    text = _FIGURES.sub("", text)
    kept, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def anchor(heading: str) -> str:
    """The fragment a heading gets on GitHub: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The fragments of every heading of a page."""
    return {anchor(line.lstrip("#")) for line in prose(text).splitlines() if re.match(r"#+ ", line)}


def goals(results: str) -> list[tuple[str, str]]:
    """(goal, table row) for each row of the results' goals table."""
    table = results.split("## Goals\n", 1)[1].strip("\n").split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| goal |")]
    return [(row.split(" | ", 1)[0][2:], row) for row in rows]


def measured_on(results: str) -> str:
    """Where and when the results' `make bench` ran: their header's first clause."""
    return results.split("\n\n", 2)[1].split(";", 1)[0].strip("`").replace("make bench` on ", "")


def figures(selectors: str, results: str) -> str:
    """The block of goals whose names start with one of `selectors` (`|`-separated; `*` is every goal), in the
    results' order; a selector that matches none is an error naming it."""
    wanted = [selector.strip() for selector in selectors.split("|")]
    rows = goals(results)
    for selector in wanted:
        if selector != "*" and not any(goal.startswith(selector) for goal, _ in rows):
            raise ValueError(f"no goal of bench/results.md starts with {selector!r}")
    chosen = [row for goal, row in rows if any(s == "*" or goal.startswith(s) for s in wanted)]
    return (
        f"From the committed `make bench` run ({measured_on(results)}; "
        "[bench/results.md](../bench/results.md) holds its tables):\n\n" + _GOALS_HEADER + "\n".join(chosen) + "\n\n"
    )


def generated(text: str, results: str, relative_to: Path) -> str:
    """`text` with every figures block written afresh from `results`, its links relative to the page's folder."""
    prefix = "../" if relative_to != ROOT else ""

    def write(found: re.Match[str]) -> str:
        body = figures(found["goals"], results).replace("](../", f"]({prefix}")
        return f"<!-- figures from bench/results.md: {found['goals']} -->\n{body}<!-- end of figures -->"

    return _FIGURES.sub(write, text)


def main() -> int:
    """Rewrite every page's figures from bench/results.md; say which pages changed."""
    results = RESULTS.read_text()
    for path in pages():
        text = path.read_text()
        fresh = generated(text, results, path.parent)
        if fresh != text:
            path.write_text(fresh)
            print(f"wrote the figures of {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
