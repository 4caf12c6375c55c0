"""The embedded cluster parses any quantity a tenant can write in constant time (a huge exponent must not hang it)."""

from __future__ import annotations

import time

from reactor_sim import quantity


def test_a_huge_exponent_parses_at_once_and_compares_as_huge() -> None:
    started = time.process_time()
    huge = quantity.parse("1e2147483647")
    tiny = quantity.parse("1e-2147483647")
    assert time.process_time() - started < 1.0
    assert huge > 2**63 and 0 < tiny < quantity.parse("1n")


def test_an_exponent_wraps_as_go_converts_it_to_int32() -> None:
    """suffixHandler.interpret parses the exponent and converts it with int32(): 4294967296 wraps to 0."""
    assert quantity.parse("1e4294967296") == 1
    assert quantity.parse("2e3") == 2000
