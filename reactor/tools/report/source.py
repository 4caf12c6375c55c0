"""What the report asks of Prometheus: range and instant queries, read only.

`RangeSource` is the narrow interface the rest of the report uses (a test can hand it any implementation);
`PrometheusSource` answers it through the project's Prometheus client (reactor/sources/prometheus.py), whose
failures are `PrometheusUnavailable`. Samples are kept as (unix seconds, value): the report's evaluation grid is
in unix seconds, as Prometheus's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from reactor.sources.prometheus import PrometheusApi

# A week of one namespace's containers at a 1-minute step is tens of MiB of JSON: well above the confirm step's cap.
MAX_BODY_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a matrix or vector answer: its labels and its (unix seconds, value) samples, in time order."""

    labels: Mapping[str, str]
    samples: tuple[tuple[float, float], ...]


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
        return [Series(s.labels, tuple((t.timestamp(), v) for t, v in s.points))
                for s in self.api.query_range(expr, start, end, step)]

    def query(self, expr: str, at: datetime | None = None) -> list[Series]:
        return [Series(s.labels, ((s.at.timestamp(), s.value),)) for s in self.api.query(expr, at)]
