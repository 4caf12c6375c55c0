"""Every relative link in README.md and docs/*.md lands: the file exists and, for `#anchor`, the heading does.

A page moved or a heading renamed breaks links silently on a forge; here it fails the test that names the line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.pages import ROOT, anchor, anchors, links, pages


def _broken(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for line, target in links(page):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        goal = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(root)}:{line} → {target}"
        if not goal.exists():
            broken.append(f"{where}: no such file")
        elif root not in goal.parents and goal != root:
            broken.append(f"{where}: outside the repository")
        elif fragment and goal.suffix == ".md" and fragment not in anchors(goal):
            broken.append(f"{where}: no such heading")
    return broken


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_lands(page: Path) -> None:
    assert _broken(page) == []


@pytest.mark.parametrize(("heading", "expected"), [
    ("Trust model: what a tenant can and cannot make the reactor do",
     "trust-model-what-a-tenant-can-and-cannot-make-the-reactor-do"),
    ("The `release` labels: three objects", "the-release-labels-three-objects"),
    ("Operators' resources", "operators-resources"),
    ("Recommend → enforce", "recommend--enforce"),
    ("0. Preflight: `reactor doctor`", "0-preflight-reactor-doctor"),
])
def test_anchors_are_spelled_as_github_spells_them(heading: str, expected: str) -> None:
    assert anchor(heading) == expected


def test_a_missing_file_and_a_missing_heading_are_both_caught(tmp_path: Path) -> None:
    """The checker itself can fail: a link to a file that is not there, and to a heading that is not there."""
    (tmp_path / "a.md").write_text("# A\n\n## Here\n\n[ok](#here) [gone](b.md) [nowhere](a.md#there)\n")
    assert [b.split(": ", 1)[1] for b in _broken(tmp_path / "a.md", tmp_path)] == ["no such file", "no such heading"]
