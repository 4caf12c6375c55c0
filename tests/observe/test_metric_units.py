"""Every metric the reactor exports is in the metric table of docs/observability.md with its unit and when it
changes, and its help text is not empty (issue 26: one unit per counter, said where an SRE reads it)."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from reactor.app.assembly import declare_metrics
from reactor.core.metrics import Metrics, StateGauge
from reactor.engine.metrics import REBALANCE_RESULTS

METRICS_PAGE = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| (?P<names>`[^|]+`) \| (?P<unit>[^|]+) \| (?P<labels>[^|]+) \| (?P<when>[^|]+) \|$", re.M)


def _declared() -> Metrics:
    """The registry with every stage's metric set declared, as the assembly declares them at start."""
    metrics = Metrics(CollectorRegistry())
    declare_metrics(metrics)
    return metrics


def _exported() -> dict[str, str]:
    """name as scraped (counters with _total) → help text, for every metric the stages declare."""
    metrics = _declared()
    found: dict[str, str] = {}
    values = [*vars(metrics).values(), *(v for s in metrics._sets.values() for v in vars(s).values())]  # noqa: SLF001
    for value in values:
        if isinstance(value, StateGauge):
            found[value.name] = value.documentation
        elif isinstance(value, (Counter, Gauge, Histogram, Info)):
            name = value._name + ("_total" if isinstance(value, Counter) else "")  # noqa: SLF001
            name += "_info" if isinstance(value, Info) else ""
            found[name] = value._documentation  # noqa: SLF001
    return found


def _table() -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for m in ROW.finditer(METRICS_PAGE):
        for name in re.findall(r"`(reactor_[a-z_]+)`", m.group("names")):
            rows[name] = (m.group("unit").strip(), m.group("when").strip())
    return rows


def test_every_metric_has_a_row_with_its_unit_and_when_it_changes() -> None:
    table = _table()
    for name, documentation in _exported().items():
        assert documentation.strip(), f"{name} has no help text"
        assert name in table, f"{name} is missing from the metric table (docs/observability.md)"
        unit, when = table[name]
        assert unit and when, f"{name}: the metric table names no unit or no moment it changes"


def test_the_table_names_no_metric_that_does_not_exist() -> None:
    assert set(_table()) <= set(_exported())


def test_skips_are_split_by_unit() -> None:
    exported = _exported()
    assert "reactor_skips_total" not in exported
    assert "one per alert" in exported["reactor_alerts_skipped_total"]
    assert "one per workload" in exported["reactor_workload_skips_total"]


def test_every_rebalance_result_is_zero_at_start_and_named_in_the_table() -> None:
    """As the other counters with a closed set of labels (engine/metrics.py): a rate() over a result that has
    not happened yet reads 0, not "no data", and the table's row names exactly the results the reactor counts."""
    metrics = _declared()
    for result in REBALANCE_RESULTS:
        assert metrics.registry.get_sample_value("reactor_rebalances_total", {"result": result}) == 0, result
    assert metrics.registry.get_sample_value("reactor_rebalance_gpus_moved_total") == 0
    row = next(m for m in ROW.finditer(METRICS_PAGE) if "`reactor_rebalances_total`" in m.group("names"))
    assert re.findall(r"`([a-z-]+)`", row.group("labels"))[1:] == list(REBALANCE_RESULTS)  # after `result`
