"""reactor/app/connections.py: per-source caps and oldest-idle eviction, the bookkeeping alone."""

from __future__ import annotations

from reactor.app.connections import Connections


def _admit(table: Connections, source: str, closed: list[str], name: str):
    return table.admit(source, lambda: closed.append(name))


def test_the_oldest_idle_connection_makes_room() -> None:
    closed: list[str] = []
    table = Connections(total=2, per_source=2)
    a, b = _admit(table, "10.0.0.1", closed, "a"), _admit(table, "10.0.0.2", closed, "b")
    assert a and b
    assert _admit(table, "10.0.0.3", closed, "c") is not None
    assert closed == ["a"] and table.open == 2 and table.evicted == 1


def test_a_connection_being_answered_is_never_evicted() -> None:
    closed: list[str] = []
    table = Connections(total=2, per_source=2)
    a, b = _admit(table, "x", closed, "a"), _admit(table, "y", closed, "b")
    assert a and b
    table.busy(a)
    assert _admit(table, "z", closed, "c") is not None and closed == ["b"]
    table.busy(table._idle and next(iter(table._idle)))  # c
    assert _admit(table, "w", closed, "d") is None and table.refused == 1


def test_a_full_source_evicts_its_own_oldest_not_anothers() -> None:
    closed: list[str] = []
    table = Connections(total=10, per_source=2)
    _admit(table, "other", closed, "o")
    _admit(table, "pod", closed, "p1")
    _admit(table, "pod", closed, "p2")
    assert _admit(table, "pod", closed, "p3") is not None
    assert closed == ["p1"]


def test_release_is_idempotent() -> None:
    table = Connections(total=1, per_source=1)
    slot = table.admit("x", lambda: None)
    assert slot is not None
    table.release(slot)
    table.release(slot)
    assert table.open == 0 and table.admit("x", lambda: None) is not None


def test_a_connection_whose_whole_head_waits_is_never_evicted() -> None:
    """A probe from the node's IP sent its request; a burst of idle connections from that IP came before the loop
    read it: the burst's own oldest go, the probe stays, and past that the burst is refused."""
    closed: list[str] = []
    table = Connections(total=10, per_source=2)
    assert table.admit("node", lambda: closed.append("probe"), lambda: True) is not None
    assert _admit(table, "node", closed, "idle1") is not None
    assert _admit(table, "node", closed, "idle2") is not None
    assert closed == ["idle1"]
    table._idle.pop(next(s for s in table._idle if s.source == "node" and not s.sent_head()))  # idle2 busy now
    assert _admit(table, "node", closed, "idle3") is None and table.refused == 1
    assert closed == ["idle1"]
