"""Doctor checks for rebalancing (`rebalance.enabled`): can the reactor ask Alertmanager which donors are idle, with
the URL, token and CA it is configured with, and can Alertmanager ever show a donor idle (the donor alerts are
loaded rules in Prometheus)?

It asks through the reactor's own client (sources/alertmanager.py), so what answers here is what the reactor will meet:
`GET /api/v2/status` (version, cluster), then the very question the rebalancer asks (`GET /api/v2/alerts` with its
filters: a proxy may let the one through and not the other). Nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from reactor.config.settings import Settings
from reactor.core.errors import AlertSourceUnavailable
from reactor.sources.alertmanager import AlertmanagerAlerts
from reactor.tools.doctor.report import Check, failing, ok, warning

SOURCE = "rebalance-source"
RULES = "rebalance-donor-rules"
SOURCE_FIX = ("set rebalance.alertmanagerUrl to Alertmanager's API as seen from the reactor's pod (e.g. "
              "http://alertmanager-operated.monitoring:9093), with rebalance.alertmanagerTokenFile / "
              "alertmanagerCaFile when a proxy guards it, and allow the egress (the chart does, with "
              "policy.rebalance.enabled)")


def source_checks(settings: Settings) -> Iterator[Check]:
    """The Alertmanager the rebalancer asks: its status, then the rebalancer's own question."""
    source = AlertmanagerAlerts(settings.alertmanager)
    try:
        status = source.status()
    except AlertSourceUnavailable as e:
        yield failing(SOURCE, f"{e.reason} (no rebalance can happen: no donor is ever shown idle)", SOURCE_FIX)
        return
    yield _status(source.url, status)
    namespace = next((n for n in settings.policy.allow if n != "*"), "default")
    donors = settings.policy.rebalance_donor_alerts
    try:
        firing = source.firing(namespace, donors)
    except AlertSourceUnavailable as e:
        yield failing(SOURCE, f"{e.reason} (the status answered, the rebalancer's question did not)", SOURCE_FIX)
        return
    yield ok(SOURCE, f"GET /api/v2/alerts answers the rebalancer's question: {len(firing)} of "
                     f"{', '.join(donors)} firing now in {namespace}")


def _status(url: str, status: Mapping[str, Any]) -> Check:
    version = str((status.get("versionInfo") or {}).get("version") or "unknown")
    cluster = status.get("cluster") or {}  # both mappings (sources/alertmanager.py checks); what is inside is not
    state = str(cluster.get("status") or "unknown")
    listed = cluster.get("peers")
    peers = len(listed) if isinstance(listed, list) else 0
    detail = f"{url} answers with the configured auth: Alertmanager {version}, cluster {state}"
    if state == "ready":
        return ok(SOURCE, f"{detail} ({peers} peer{'s' if peers != 1 else ''})")
    if state == "disabled":
        return ok(SOURCE, f"{detail} (a single instance)")
    return warning(SOURCE, f"{detail}: its peers have not settled, so its silences may be incomplete",
                   "wait for the cluster to settle (cluster.status ready in /api/v2/status)")


def donor_rules(rules: Iterable[Mapping[str, Any]], donors: Iterable[str]) -> Check:
    """Each donor alert is an alerting rule Prometheus has loaded: else Alertmanager never shows a donor idle."""
    loaded = {str(r.get("name")) for r in rules if r.get("type") == "alerting"}
    wanted = list(donors)
    missing = [name for name in wanted if name not in loaded]
    if missing:
        return failing(RULES, f"rebalance.donorAlerts {', '.join(missing)} not among the loaded alerting rules: "
                              "no workload can ever show idle by them",
                       "load the reactor's rules (`reactor rules render`, or the chart's prometheusRule), or "
                       "list loaded alert names in rebalance.donorAlerts")
    return ok(RULES, f"rebalance.donorAlerts {', '.join(wanted)} are loaded alerting rules")
