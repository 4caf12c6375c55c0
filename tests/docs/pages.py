"""The project's Markdown pages as a reader meets them: their headings (as GitHub anchors them), links and shell blocks.

Only what the docs tests need: fenced blocks are told apart from prose (a `# comment` in a block is no heading), and
the comment right before a shell block says how the block is tested.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
# How a block is tested, said in an HTML comment on the line before its fence.
MARKER = re.compile(r"^<!--\s*(not run|run by|run with):\s*(.*?)\s*-->$")


def pages() -> list[Path]:
    """README.md and every page under docs/: the pages whose commands and links are held by these tests."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int          # 1-based line of the opening fence
    language: str
    text: str
    marker: str        # "", "not run", "run by" or "run with"
    reason: str        # the marker's text: why not, which test, or what it runs against

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _fenced(lines: list[str]) -> list[tuple[int, int, str]]:
    """(opening line index, closing line index, language) of each fenced block."""
    found, start, language = [], -1, ""
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("```"):
            continue
        if start < 0:
            start, language = i, line.lstrip()[3:].strip()
        else:
            found.append((start, i, language))
            start = -1
    assert start < 0, f"a fence opened at line {start + 1} is never closed"
    return found


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for start, end, language in _fenced(lines):
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(before)
        indent = len(lines[start]) - len(lines[start].lstrip())
        body = "\n".join(line[indent:] for line in lines[start + 1:end])
        found.append(Block(page, start + 1, language, body + "\n", marker[1] if marker else "",
                           marker[2] if marker else ""))
    return found


def shell_blocks(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.language in SHELL_LANGUAGES]


def prose(page: Path) -> list[tuple[int, str]]:
    """(1-based line number, text) of the lines outside fenced blocks."""
    lines = page.read_text(encoding="utf-8").splitlines()
    inside = {i for start, end, _ in _fenced(lines) for i in range(start, end + 1)}
    return [(i + 1, line) for i, line in enumerate(lines) if i not in inside]


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, `-`, `_` kept), spaces → `-`."""
    text = re.sub(r"`|\*\*|(?<!\w)_|_(?!\w)", "", heading.strip()).lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor of the page's headings, repeats numbered as GitHub numbers them (`-1`, `-2`)."""
    seen: dict[str, int] = {}
    for _, line in prose(page):
        heading = re.match(r"#{1,6} (.+)", line)
        if heading is None:
            continue
        name = anchor(heading[1])
        seen[name] = seen.get(name, -1) + 1
    return {name if n == 0 else f"{name}-{n}" for name, count in seen.items() for n in range(count + 1)}


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of each Markdown link in the page's prose, its text possibly wrapped over lines; inline code
    spans are not links."""
    lines = dict(prose(page))
    blank = [re.sub(r"`[^`\n]*`", lambda m: " " * len(m[0]), lines.get(n, "")) for n in range(1, max(lines) + 1)]
    text = "\n".join(blank)
    return [(text.count("\n", 0, m.start(1)) + 1, m[1]) for m in LINK.finditer(text)]
