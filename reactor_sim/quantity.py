"""Kubernetes resource quantities ("500m", "2Gi", "1e3") as exact fractions, and back to text.

Pure arithmetic; no knowledge of pods or quotas.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

_SUFFIX = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
           "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
           "P": Fraction(10**15), "E": Fraction(10**18),
           "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
           "Pi": Fraction(2**50), "Ei": Fraction(2**60)}
_RE = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse(value: object) -> Fraction:
    """Parse a quantity; raises ValueError on text the API server would reject."""
    if isinstance(value, bool):
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, (int, float)):
        return Fraction(str(value))
    return _parse_text(str(value))


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """Cached: quota and scheduling parse the same few quantities of thousands of pods (Fractions are immutable)."""
    m = _RE.match(value.strip())
    if not m:
        raise ValueError("quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    number = Fraction(m.group(1))
    if m.group(2):
        number *= _power_of_ten(int(m.group(2)[1:]))
    return number * _SUFFIX[m.group(3) or ""]


# Past this an exponent only says "larger than any int64 quantity" (or "finer than a nano"): the API server keeps
# such a value as an inf.Dec scale (quantity.go), never as digits, so it parses in constant time whatever a tenant
# writes; computing 10**4294967296 here would hang the embedded cluster instead.
_EXPONENT_BOUND = 40


def _power_of_ten(exponent: int) -> Fraction:
    exponent = (exponent + 2**31) % 2**32 - 2**31  # Go's int32 conversion of the parsed exponent (suffixHandler)
    if exponent > _EXPONENT_BOUND:
        return Fraction(10) ** _EXPONENT_BOUND
    if exponent < -_EXPONENT_BOUND:
        return Fraction(1, 10**_EXPONENT_BOUND)
    return Fraction(10) ** exponent


def render(value: Fraction, *, binary: bool = False) -> str:
    """Canonical-ish text: integers plain, CPU-like fractions in milli, byte sizes in Ki/Mi/Gi."""
    if binary and value.denominator == 1 and value:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _SUFFIX[suffix]
            if value % unit == 0:
                return f"{value // unit}{suffix}"
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{float(value)}"


def is_binary(text: object) -> bool:
    return isinstance(text, str) and text.endswith("i")
