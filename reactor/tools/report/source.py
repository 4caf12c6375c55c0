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
from typing import Protocol

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
        return [Series.of(s.labels, ((t.timestamp(), v) for t, v in s.points))
                for s in self.api.query_range(expr, start, end, step)]

    def query(self, expr: str, at: datetime | None = None) -> list[Series]:
        return [Series.of(s.labels, ((s.at.timestamp(), s.value),)) for s in self.api.query(expr, at)]
