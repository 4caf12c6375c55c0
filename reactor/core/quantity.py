"""Kubernetes quantities ("4", "500m", "1Gi") read as the API server reads them.

One parser for the whole service, below every stage, so the cluster reader, Kueue's quota lines and the
compute conversions all agree on what a quantity means.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_QUANTITY = re.compile(r"^([+-]?\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi)?$")


def parse_quantity(raw: Any) -> Decimal:
    """A Kubernetes quantity ("4", "500m", "1Gi") as a Decimal; unparseable → ValueError."""
    text = str(raw).strip()
    m = _QUANTITY.match(text)
    if m is None:
        raise ValueError(f"not a quantity: {text!r}")
    number, suffix = m.groups()
    try:
        value = Decimal(number)
    except InvalidOperation as e:
        raise ValueError(f"not a quantity: {text!r}") from e
    return value / 1000 if suffix == "m" else value * _SUFFIX[suffix or ""]
