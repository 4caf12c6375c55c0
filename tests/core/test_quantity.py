"""The service's one quantity parser (reactor/core/quantity.py) against the API server's.

The tables are k8s.io/apimachinery/pkg/api/resource/quantity_test.go's (TestQuantityParse, TestParseQuantity,
TestQuantityString, TestQuantityParseEmit), value for value. The properties: every canonical spelling the API
server writes (`Quantity.String()`, ported below from quantity.go CanonicalizeBytes) parses to its value, here,
in the official client's `kubernetes.utils.parse_quantity` and in the embedded cluster's parser; every quantity
the reactor writes it reads back to the same number.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as client_parse

from reactor.cluster.compute import cpu_quantity, memory_quantity
from reactor.core.quantity import MAX_INT64, milli_value, parse_quantity, value
from reactor_sim import quantity as sim_quantity

pytestmark = pytest.mark.unit

KI, MI, GI, TI, PI, EI = (1 << (10 * i) for i in range(1, 7))

# TestQuantityParse's table: input -> the value its expected Quantity holds.
PARSED = [
    ("0", "0"), ("0n", "0"), ("0u", "0"), ("0m", "0"), ("0Ki", "0"), ("0k", "0"), ("0Mi", "0"), ("0M", "0"),
    ("0Gi", "0"), ("0G", "0"), ("0Ti", "0"), ("0T", "0"),
    ("1", "1"),
    ("1Ki", KI), ("8Ki", 8 * KI), ("7Mi", 7 * MI), ("6Gi", 6 * GI), ("5Ti", 5 * TI), ("4Pi", 4 * PI), ("3Ei", 3 * EI),
    ("10Ti", 10 * TI), ("100Ti", 100 * TI),
    ("5n", "5e-9"), ("4u", "4e-6"), ("3m", "3e-3"), ("9", "9"), ("8k", "8e3"), ("50k", "5e4"), ("7M", "7e6"),
    ("6G", "6e9"), ("5T", "5e12"), ("40T", "4e13"), ("300T", "3e14"), ("2P", "2e15"), ("1E", "1e18"),
    ("1E-3", "1e-3"), ("1e3", "1e3"), ("1E6", "1e6"), ("1e9", "1e9"), ("1E12", "1e12"), ("1e15", "1e15"),
    ("1E18", "1e18"),
    ("1e14", "1e14"), ("1e13", "1e13"), ("100.035k", "100035"),
    ("0.001", "1e-3"), ("0.0005k", "5e-1"), ("0.005", "5e-3"), ("0.05", "5e-2"), ("0.5", "5e-1"),
    ("0.00050k", "5e-1"), ("0.00500", "5e-3"), ("0.05000", "5e-2"), ("0.50000", "5e-1"), ("0.5e0", "5e-1"),
    ("0.5e-1", "5e-2"), ("0.5e-2", "5e-3"), ("10.035M", "10035e3"),
    ("1.2e3", "12e2"), ("1.3E+6", "13e5"), ("1.40e9", "14e8"), ("1.53E12", "153e10"), ("1.6e15", "16e14"),
    ("1.7E18", "17e17"),
    ("9.01", "901e-2"), ("8.1k", "81e2"), ("7.123456M", "7123456"), ("6.987654321G", "6987654321"),
    ("5.444T", "5444e9"), ("40.1T", "401e11"), ("300.2T", "3002e11"), ("2.5P", "25e14"), ("1.01E", "101e16"),
    # things that saturate or round
    ("3.001n", "4e-9"), ("1.1E-9", "2e-9"), ("0.0000000001", "1e-9"), ("0.0000000005", "1e-9"),
    ("0.00000000050", "1e-9"), ("0.5e-9", "1e-9"), ("0.9n", "1e-9"), ("0.00000012345", "124e-9"),
    ("0.00000012354", "124e-9"), ("9Ei", MAX_INT64), ("9223372036854775807Ki", MAX_INT64), ("12E", "12e18"),
    # fractional binary
    ("100.035Ki", "10243584e-2"), ("0.5Mi", MI // 2), ("0.05Gi", "536870912e-1"), ("0.025Ti", "274877906944e-1"),
    # "things written by trolls"
    ("0.000000000001Ki", "2e-9"), (".001", "1e-3"), (".0001k", "100e-3"), ("1.", "1"), ("1.G", "1e9"),
]

# TestQuantityParse's invalid list, and spellings parseQuantityString or the suffixer refuse.
INVALID = ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
           " 1x", "1K", "1e", "1e3k", "1e3Ki", "1Ki3", "1ee3", "1e3.5", "Infinity", "NaN", "1_000", "0x10",
           "1e9223372036854775808", ".e-10", "١"]

# TestParseQuantity: values past int64 are kept exactly (only binary suffixes are capped).
EXACT = [("999999999999999999.1", "999999999999999999.1"), ("9999999999999999999", "9999999999999999999"),
         ("1.0000000000000000001E", "1000000000000000000.1"), ("10.000000000000000001E", "10000000000000000001"),
         ("-9223372036854775809", "-9223372036854775809"), ("9223372036854775808.1", "9223372036854775808.1"),
         ("10000000000000000000000m", "10000000000000000000")]

# TestQuantityString / TestQuantityParseEmit: canonical spellings (and alternates) of known values.
CANONICAL = [("1Gi", GI), ("1024Mi", GI), ("300Mi", 300 * MI), ("307200Ki", 300 * MI), ("6Ki", 6 * KI),
             ("1001Gi", 1001 * GI), ("1Ti", TI), ("5", 5), ("500m", "0.5"), ("1G", "1e9"), ("0.001T", "1e9"),
             ("1m", "1e-3"), ("1000u", "1e-3"), ("1080m", "1.08"), ("1080000000n", "1.08"), ("1234567M", "1234567e6"),
             ("1234567m", "1234.567"), ("1025", 1025), ("1e9", "1e9"), (".001e12", "1e9"), ("1e-3", "1e-3"),
             ("0.001e0", "1e-3"), ("1000e-12", "1e-9"), ("80e-3", "0.08"), ("300e6", "3e8"), ("00", 0),
             ("1n", "1e-9"), ("1080n", "1.08e-6"), ("1u", "1e-6"), (".001Ki", "1.024"), (".000001Ki", "1.024e-3"),
             (".000000001Ki", "1.024e-6"), (".000000000001Ki", "2e-9")]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_parses_as_the_api_server(text: str, expected: object) -> None:
    want = Decimal(expected) if isinstance(expected, str) else Decimal(expected)  # type: ignore[arg-type]
    assert parse_quantity(text) == want
    assert parse_quantity("+" + text) == want  # as TestQuantityParse tries each with an explicit sign
    assert parse_quantity("-" + text) == -want


@pytest.mark.parametrize("text", INVALID)
def test_refuses_what_the_api_server_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(("text", "expected"), EXACT)
def test_keeps_values_past_int64_exactly(text: str, expected: str) -> None:
    assert parse_quantity(text) == Decimal(expected)


@pytest.mark.parametrize(("text", "expected"), CANONICAL)
def test_canonical_spellings(text: str, expected: object) -> None:
    assert parse_quantity(text) == Decimal(expected)  # type: ignore[arg-type]


def test_edges_of_the_grammar() -> None:
    """parseQuantityString takes a bare sign, a bare point and a bare suffix as zero; exponents wrap at int32."""
    for zero in (".", "+", "-", "-.", "k", "Ki", "m", "000"):
        assert parse_quantity(zero) == 0
    assert parse_quantity("1e4294967296") == 1  # int32(2^32) is 0, as Go converts the parsed exponent
    assert parse_quantity(" 2Ti\n") == 2 * TI  # UnmarshalJSON trims space
    assert parse_quantity(2) == 2 and parse_quantity(0.5) == Decimal("0.5") and parse_quantity(1e20) == 10**20
    for wrong in (True, None, [1], {"a": 1}):
        with pytest.raises(ValueError):
            parse_quantity(wrong)


def test_integer_views_round_up_and_stay_in_int64() -> None:
    """Value() and MilliValue(): ceil; outside int64 an error, never a wrapped or giant integer."""
    assert value("1e0") == 1 and value("2Ti") == 2 * TI and value("0.5") == 1 and value("-0.5") == 0
    assert milli_value("1.0001") == 1001 and milli_value("250m") == 250 and milli_value("1n") == 1
    assert value("9Ei") == MAX_INT64
    for huge in ("1e2000000000", "10E", "-10E"):
        with pytest.raises(ValueError, match="out of range"):
            value(huge)
    assert parse_quantity("1e-2000000000") == Decimal("1e-9")  # rounded up to one nano, cheaply


# --- canonical spellings, as quantity.go CanonicalizeBytes writes them ------------------------------------

def canonical(amount: Decimal, binary: bool) -> str:
    """Quantity.String() of a value parsed in BinarySI (binary) or DecimalSI format (a port of CanonicalizeBytes,
    AsCanonicalBytes, AsCanonicalBase1024Bytes; for |value| < 10^21, where DecimalSI has a suffix)."""
    if amount == 0:
        return "0"
    sign = "-" if amount < 0 else ""
    magnitude = abs(amount)
    if binary and magnitude >= 1024 and magnitude == magnitude.to_integral_value():
        number, power = int(magnitude), 0
        while number % 1024 == 0 and power < 6:
            number, power = number // 1024, power + 1
        return f"{sign}{number}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][power]}"
    _, digits, exponent = magnitude.normalize().as_tuple()
    mantissa = int("".join(map(str, digits)))
    assert isinstance(exponent, int)
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    suffix = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}[exponent]
    return f"{sign}{mantissa}{suffix}"


# As the upstream fuzzer draws quantities: int63 values at scales 0..3 or below a thousand at scales 3..-11,
# BinarySI integers (and multiples of 1024^k).
_decimal_values = st.one_of(
    st.builds(lambda n, s: Decimal(n).scaleb(-s), st.integers(-(10**18), 10**18), st.integers(0, 3)),
    st.builds(lambda n, s: Decimal(n).scaleb(-s), st.integers(-999, 999), st.integers(-11, 9)),
)
_binary_values = st.one_of(st.integers(-MAX_INT64, MAX_INT64),
                           st.builds(lambda n, k: n << (10 * k), st.integers(-1023, 1023), st.integers(0, 5)))


@given(_decimal_values)
def test_every_canonical_decimal_spelling_parses_to_its_value(amount: Decimal) -> None:
    text = canonical(amount, binary=False)
    assert parse_quantity(text) == amount
    assert client_parse(text) == amount  # the official client agrees on canonical spellings
    assert sim_quantity.parse(text) == amount  # and so does the embedded cluster


@given(_binary_values)
def test_every_canonical_binary_spelling_parses_to_its_value(size: int) -> None:
    text = canonical(Decimal(size), binary=True)
    assert parse_quantity(text) == size
    assert client_parse(text) == size
    assert sim_quantity.parse(text) == size


@given(st.integers(0, 64_000_000))
def test_every_cpu_quantity_the_reactor_writes_reads_back(millis: int) -> None:
    assert milli_value(cpu_quantity(millis)) == millis


@given(st.one_of(st.integers(0, 1 << 62), st.builds(lambda n, k: n << (10 * k), st.integers(0, 8191),
                                                    st.integers(0, 5))))
def test_every_memory_quantity_the_reactor_writes_reads_back(size: int) -> None:
    assert value(memory_quantity(size)) == size


@given(st.integers(0, 10_000))
def test_every_gpu_count_the_reactor_writes_reads_back(gpus: int) -> None:
    assert value(str(gpus)) == gpus  # cluster.patches.template_patch writes str(count) into requests and limits


@given(st.text(alphabet="0123456789.+-eEinumkKMGTP ", max_size=12))
def test_any_text_is_a_value_or_a_value_error(text: str) -> None:
    try:
        parsed = parse_quantity(text)
    except ValueError:
        return
    assert parsed.is_finite()
