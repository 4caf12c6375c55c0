"""The webhook token file (reactor/intake/bearer.py) is read by content: a token rewritten in place with the same
size and its old mtime rotates (issue 12: it used to stay valid), an empty file lets nobody in. Its stat is taken at
most every CHECK_SECONDS, so a change takes effect within that (not on every request: a system call per request
costs the serving worker two context switches)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reactor.core.errors import ReactorError
from reactor.intake import bearer
from reactor.intake.bearer import CHECK_SECONDS, TokenFile
from tests.support import TOKEN, Reactor, files_checked, sample

pytestmark = pytest.mark.unit

OLD, NEW = "old-token-aaaaaaaaaaaaaaaa", "new-token-bbbbbbbbbbbbbbbb"  # the same length


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rewrite_in_place(path: Path, text: str) -> None:
    """Same inode, same size, the old mtime put back: what a stat-based check cannot see."""
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.write(text.encode())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def test_a_same_size_rewrite_with_the_old_mtime_rotates_the_token(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(OLD)
    clock = Clock()
    token = TokenFile(str(path), clock=clock)
    assert token.matches(f"Bearer {OLD}")
    rewrite_in_place(path, NEW)
    clock.now += CHECK_SECONDS / 2
    assert token.matches(f"Bearer {OLD}")  # checked half a check ago: the token held
    clock.now += CHECK_SECONDS / 2
    assert not token.matches(f"Bearer {OLD}")
    assert token.matches(f"Bearer {NEW}")


def test_the_file_is_stated_at_most_once_per_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "token"
    path.write_text(OLD)
    clock = Clock()
    token = TokenFile(str(path), clock=clock)
    stats: list[object] = []
    real_stat = os.stat

    def counted(path: object, *args: object, **kwargs: object) -> os.stat_result:
        stats.append(path)
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bearer.os, "stat", counted)
    for _ in range(3 * 64):  # three checks' worth of requests, the first at the construction's check
        assert token.matches(f"Bearer {OLD}")
        clock.now += CHECK_SECONDS / 64
    assert stats.count(str(path)) == 2


def test_the_content_is_read_again_even_when_nothing_in_stat_changed(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system with coarse timestamps (or a ctime that did not move): the periodic re-read by content
    still rotates the token, at most `reread_seconds` later."""
    path = tmp_path / "token"
    path.write_text(OLD)
    clock = Clock()
    token = TokenFile(str(path), reread_seconds=2.0, clock=clock)
    frozen = os.stat(path)
    monkeypatch.setattr(bearer.os, "stat", lambda _: frozen)
    path.write_text(NEW)
    clock.now += 1.0
    assert token.matches(f"Bearer {OLD}")  # within the re-read interval the cached token holds
    clock.now += 1.0
    assert not token.matches(f"Bearer {OLD}") and token.matches(f"Bearer {NEW}")


def test_an_emptied_file_fails_closed_until_it_holds_a_token_again(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(OLD)
    clock = Clock()
    token = TokenFile(str(path), clock=clock)
    path.write_text("  \n")
    clock.now += CHECK_SECONDS
    for _ in range(2):
        with pytest.raises(ReactorError, match="is empty"):
            token.matches(f"Bearer {OLD}")
    path.write_text(NEW)
    assert token.matches(f"Bearer {NEW}")  # once refused, the file is checked at every request


def test_an_empty_file_fails_at_start(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("")
    with pytest.raises(ReactorError):
        TokenFile(str(path))


def test_over_the_webhook_the_in_place_rotation_takes_effect_within_a_check(reactor: Reactor,
                                                                           token_file: Path) -> None:
    rotated = "t" * len(TOKEN)
    rewrite_in_place(token_file, rotated)
    files_checked()
    assert reactor.post(sample("underutilized-firing")).status_code == 401
    assert reactor.post(sample("underutilized-firing"), token=rotated).status_code == 200
    token_file.write_text("")
    files_checked()
    answer = reactor.post(sample("underutilized-firing"), token=rotated)
    assert (answer.status_code, answer.get_json()) == (503, {"error": "the webhook token cannot be read; retry"})
