"""Kubernetes resource quantities ("500m", "2Ti", "1e0") read exactly as the API server reads them.

The one parser of the service: every quantity the reactor reads from an object (GPU counts, CPU, memory,
LimitRange and ResourceQuota lines) and from its policy file goes through `parse_quantity`. It is a port of
k8s.io/apimachinery/pkg/api/resource/quantity.go (`parseQuantityString` and `ParseQuantity`, as called by
`Quantity.UnmarshalJSON`, which trims surrounding space): the same grammar, the same rounding of anything
finer than a nano up (away from zero), the same cap of binary-suffixed values at 2^63-1, and Go's int32
arithmetic on the decimal exponent. The official client's `kubernetes.utils.parse_quantity` is looser (it
takes `1K`, `1mi`, `1e3k`, `Infinity`, which the API server refuses), hence a port rather than a wrapper.

Values are exact `Decimal`s (never floats). `value` and `milli_value` give the integers the API server's
`Quantity.Value()` and `MilliValue()` give: rounded up, and refused (ValueError) outside int64 rather than
wrapped. Pure; no I/O.
"""

from __future__ import annotations

import decimal
import functools
from decimal import Decimal
from typing import Final

MAX_INT64: Final = (1 << 63) - 1
MIN_INT64: Final = -(1 << 63)
# suffix.go newSuffixer: the decimal SI suffixes (10^e) and the binary ones (2^e).
DECIMAL_SI: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY_SI: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")  # parseQuantityString's suffix alphabet
_MAX_INT64_FACTORS = 18  # quantity.go maxInt64Factors
_NANO = Decimal("1e-9")
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                         traps=[decimal.InvalidOperation, decimal.Overflow, decimal.DivisionByZero])


def parse_quantity(raw: object) -> Decimal:
    """A quantity as the API server reads it from JSON; ValueError (saying why) for what it refuses.

    Strings are trimmed (UnmarshalJSON's strings.TrimSpace); a JSON number (int, float) is read from its
    text, as the API server reads `"cpu": 2`; bools and anything else are refused.
    """
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float, Decimal)):
        raise ValueError(f"not a quantity: {raw!r}")
    text = raw.strip() if isinstance(raw, str) else str(raw)
    return _parse(text)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Decimal:
    """Cached: the same few spellings recur across thousands of pods and quota lines (Decimals are immutable)."""
    if not text:
        raise ValueError("not a quantity: ''")
    if text == "0":
        return Decimal(0)
    positive, value, num, denom, suffix = _split(text)
    base, exponent, binary = _interpret(text, suffix)
    if binary:
        scale, mantissa = 0, 1
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - exponent * 3 // 10 - 1
        else:
            precision = -1
    else:
        scale, mantissa, precision = exponent, 1, _MAX_INT64_FACTORS - (len(num) + len(denom))
    if precision >= 0:  # the int64 fast path: exact, and already in nano units
        scale = _int32(scale - len(denom))
        if scale >= -9:
            shifted = int(num + denom)
            result = shifted * mantissa
            if result <= MAX_INT64:  # int64Multiply did not overflow
                return _decimal(positive, result, scale)
    # The inf.Dec path: inf.Dec.SetString(value) needs a digit.
    if not any(c in _DIGITS for c in value):
        raise ValueError(f"not a quantity: {text!r} (no digits)")
    dec_scale = len(denom)  # inf.Dec scale: the value is unscaled × 10^-scale
    if base == 10:
        dec_scale = _int32(dec_scale + _int32(-exponent))
    amount = Decimal((0, tuple(int(d) for d in num + denom), -dec_scale))  # digit by digit: no int() size limit
    if base == 2:
        amount = _EXACT.multiply(amount, Decimal(1 << exponent))
    if not amount.is_zero() and int(amount.as_tuple().exponent) < -9:
        # Non-zero values are rounded up to the smallest representable one: "if you want some resources,
        # you should get some resources".
        amount = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=_EXACT)
    if binary and amount > MAX_INT64:
        amount = Decimal(MAX_INT64)
    return amount if positive or amount.is_zero() else -amount


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString: (positive, the number as written, its integer digits without leading zeros, its
    fraction digits, the suffix). ValueError where the suffix is not letters, then an optional signed
    integer."""
    positive, pos, end = True, 0, len(text)
    if text[0] in "+-":
        positive, pos = text[0] == "+", 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise ValueError(f"not a quantity: {text!r} (quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$')")
    return positive, value, num, denom, text[suffix_start:]


def _interpret(text: str, suffix: str) -> tuple[int, int, bool]:
    """suffixHandler.interpret: (base, exponent, binary) of a suffix, or ValueError (ErrSuffix)."""
    if suffix in DECIMAL_SI:
        return 10, DECIMAL_SI[suffix], False
    if suffix in BINARY_SI:
        return 2, BINARY_SI[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:].removeprefix("+").removeprefix("-")
        if digits and all(c in _DIGITS for c in digits) and suffix[1:].count("+") + suffix[1:].count("-") <= 1:
            parsed = int(suffix[1:])
            if MIN_INT64 <= parsed <= MAX_INT64:  # strconv.ParseInt(…, 10, 64)
                return 10, _int32(parsed), False  # then int32(parsed), as Go converts it
    raise ValueError(f"not a quantity: {text!r} (unable to parse quantity's suffix)")


def _int32(n: int) -> int:
    """Go's int32 conversion and arithmetic: wraps around."""
    return (n + (1 << 31)) % (1 << 32) - (1 << 31)


def _decimal(positive: bool, unscaled: int, exponent: int) -> Decimal:
    return Decimal((0 if positive or not unscaled else 1, tuple(int(d) for d in str(unscaled)), exponent))


def value(raw: object) -> int:
    """`Quantity.Value()`: the quantity rounded up to an integer; ValueError when unparseable or outside int64."""
    return _ceil(parse_quantity(raw), 0)


def milli_value(raw: object) -> int:
    """`Quantity.MilliValue()`: the quantity in thousandths, rounded up; ValueError like `value`."""
    return _ceil(parse_quantity(raw), 3)


def _ceil(amount: Decimal, scale: int) -> int:
    if amount.is_zero():
        return 0
    if amount.adjusted() + scale > 19:  # beyond any int64, and cheap to say so before building the integer
        raise ValueError(f"quantity {amount} is out of range")
    scaled = amount.scaleb(scale, context=_EXACT).to_integral_value(rounding=decimal.ROUND_CEILING, context=_EXACT)
    result = int(scaled)
    if not MIN_INT64 <= result <= MAX_INT64:
        raise ValueError(f"quantity {amount} is out of range")
    return result
