"""What the report asks of Prometheus: range and instant queries, read only.

`RangeSource` is the narrow interface the rest of the report uses (a test can hand it any implementation);
`PrometheusSource` answers it through the project's Prometheus client (reactor/sources/prometheus.py), whose
failures are `PrometheusUnavailable`. Samples are kept as (unix seconds, value): the report's evaluation grid is
in unix seconds, as Prometheus's own.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from reactor.sources.prometheus import PrometheusApi

# A week of one namespace's containers at a 1-minute step is tens of MiB of JSON: well above the confirm step's cap.
MAX_BODY_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a matrix or vector answer: its labels and its samples' unix seconds and values, in time order.

    Two arrays of doubles: a week of one namespace's thousand containers at a 5-minute step is two million samples
    per series, 16 bytes each here and over a hundred as tuples of floats.
    """

    labels: Mapping[str, str]
    times: array[float]
    values: array[float]

    @classmethod
    def of(cls, labels: Mapping[str, str], samples: Iterable[tuple[float, float]]) -> Series:
        times, values = array("d"), array("d")
        for t, v in samples:
            times.append(t)
            values.append(v)
        return cls(labels, times, values)

    @property
    def samples(self) -> tuple[tuple[float, float], ...]:
        """(unix seconds, value) pairs: for the few that want them so (an alert's answer), not for bulk reads."""
        return tuple(zip(self.times, self.values, strict=True))


def read_matrix(data: Any) -> list[Series]:
    """A range query's matrix straight into arrays (the client's own reader makes a datetime of every sample: a
    third of a day of 1,000 series' parsing). Prometheus prints each value as a string ("0.25", "NaN", "+Inf")."""
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise ValueError(f"expected a matrix, got resultType {str(data.get('resultType'))[:40]!r}")
    found = []
    for s in data["result"]:
        labels = s["metric"]
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in labels.items()):
            raise TypeError("expected labels: an object of strings")
        samples = s["values"]
        found.append(Series(labels, array("d", [float(t) for t, _ in samples]),
                            array("d", [float(v) for _, v in samples])))
    return found


class RangeSource(Protocol):
    def query_range(self, expr: str, start: datetime, end: datetime, step: timedelta) -> Sequence[Series]: ...

    def query(self, expr: str, at: datetime | None = None) -> Sequence[Series]: ...


class PrometheusSource:
    """`RangeSource` over the project's Prometheus client."""

    def __init__(self, api: PrometheusApi) -> None:
        self.api = api

    @property
    def url(self) -> str:
        return self.api.url

    def query_range(self, expr: str, start: datetime, end: datetime, step: timedelta) -> list[Series]:
        return self.api.query_range_read(expr, start, end, step, read_matrix)

    def query(self, expr: str, at: datetime | None = None) -> list[Series]:
        return [Series.of(s.labels, ((s.at.timestamp(), s.value),)) for s in self.api.query(expr, at)]
