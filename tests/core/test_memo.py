"""`core/memo.py`: a memo stays within its limit, whatever is added, and keeps what was added since it started
again."""

from __future__ import annotations

from reactor.core.memo import Memo


def test_a_memo_starts_again_when_full_and_keeps_what_came_after() -> None:
    memo: Memo[int, str] = Memo(3)
    assert [memo.keep(i, str(i)) for i in range(3)] == ["0", "1", "2"]
    assert memo.keep(3, "3") == "3"
    assert memo == {3: "3"} and memo.get(0) is None


def test_a_memo_never_holds_more_than_its_limit() -> None:
    memo: Memo[int, int] = Memo(10)
    for i in range(1000):
        memo.keep(i % 37, i)
        assert len(memo) <= 10
