"""Doctor checks on where the DCGM series come from: the exporter's own scrape targets, scraped the way the rules
assume, and no other target serving DCGM_FI_* series.

Why: the rules count only series whose target labels (`job`, and `namespace` in the exported spelling) match
`exporter.job` / `exporter.namespace` (rules/thresholds.yaml). That holds only while those labels are the ones
Prometheus set: a target scraped with `honorLabels: true` keeps the labels its pod writes, `job` and `namespace`
among them. So the exporter must be scraped with the honorLabels its spelling assumes, and any other target that
serves DCGM-named series is named here, so that nobody's pod can speak for a GPU.

Reads only: /api/v1/targets, /api/v1/status/config, /api/v1/targets/metadata and instant queries. Each function
returns `Check`s; none raises for a finding, only `Unreachable` when Prometheus does not answer.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reactor.tools.doctor.http import Unreachable, get_json, prometheus_query
from reactor.tools.doctor.report import Check, failing, ok, warning

DCGM = '{__name__=~"DCGM_FI_.+"}'
_MATCHER = re.compile(r'\b(job|namespace)=~"([^"]*)"')
_RAW = re.compile(r"DCGM_FI_[A-Z_]+\{([^}]*)\}")
RENDER_FIX = "set exporter.job / exporter.namespace in rules/thresholds.yaml to your exporter's target labels, " \
             "`reactor rules render`, reload the rules"


@dataclass(frozen=True, slots=True)
class Exporter:
    """What the rules take for the exporter's own targets: regexes of `job` and `namespace` ("" = any), and the
    label spelling they read (exported: honorLabels false; plain: true)."""

    job: str
    namespace: str
    spelling: str
    source: str  # where these came from: "loaded rules" or the thresholds file

    def owns(self, labels: Mapping[str, str]) -> bool:
        """Whether a target (or a series' target labels) is the exporter's, as the rules' matchers decide."""
        return all(re.fullmatch(pattern, labels.get(label, "")) is not None
                   for label, pattern in (("job", self.job), ("namespace", self.namespace)) if pattern)

    @property
    def describe(self) -> str:
        parts = [f'job=~"{self.job}"'] if self.job else []
        return ", ".join(parts + ([f'namespace=~"{self.namespace}"'] if self.namespace else []))


def exporter_of_rules(rules: Iterable[dict[str, Any]], spelling: str | None) -> Exporter | None:
    """The exporter's target matchers as the loaded recording rules carry them; None when they carry none
    (rules rendered before the matchers existed, or no rules)."""
    found: dict[str, str] = {}
    for rule in rules:
        for inside in _RAW.findall(str(rule.get("query", ""))):
            found.update(dict(_MATCHER.findall(inside)))
    if not found or spelling is None:
        return None
    return Exporter(found.get("job", ""), found.get("namespace", ""), spelling, "loaded rules")


def scrape_checks(base: str, exporter: Exporter | None) -> list[Check]:
    """`exporter-scrape`, then `dcgm-sources`."""
    if exporter is None:
        fix = "load the rules rendered by this version, or pass --thresholds rules/thresholds.yaml"
        return [warning("exporter-scrape", "which scrape targets the rules count is unknown", fix),
                warning("dcgm-sources", "not checked: the exporter's targets are unknown", fix)]
    targets = _active_targets(base)
    return [exporter_scrape(base, exporter, targets), dcgm_sources(base, exporter, targets)]


def _active_targets(base: str) -> list[dict[str, Any]]:
    body = get_json(f"{base.rstrip('/')}/api/v1/targets?state=active")
    data = body.get("data") if isinstance(body, dict) else None
    return list((data or {}).get("activeTargets") or [])


def honor_labels(base: str) -> dict[str, bool]:
    """Each scrape pool's `honor_labels` from the loaded configuration (false when unset, Prometheus's default)."""
    body = get_json(f"{base.rstrip('/')}/api/v1/status/config")
    text = ((body.get("data") or {}).get("yaml") or "") if isinstance(body, dict) else ""
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise Unreachable(f"{base}: /api/v1/status/config is not YAML: {e}") from e
    return {str(c.get("job_name")): bool(c.get("honor_labels", False))
            for c in config.get("scrape_configs") or [] if isinstance(c, dict)}


def exporter_scrape(base: str, exporter: Exporter, targets: list[dict[str, Any]]) -> Check:
    """The exporter's targets exist, and are scraped with the honorLabels the rules' spelling assumes."""
    ours = [t for t in targets if exporter.owns(t.get("labels") or {})]
    if not ours:
        return failing("exporter-scrape", f"no active scrape target has {exporter.describe} ({exporter.source}): "
                       "the rules count no GPU series at all", RENDER_FIX + " (see `up{job=~\".*dcgm.*\"}`)")
    pools = sorted({str(t.get("scrapePool", "")) for t in ours})
    honored = honor_labels(base)
    want = exporter.spelling == "plain"
    wrong = [p for p in pools if honored.get(p, False) != want]
    if wrong:
        return failing("exporter-scrape", f"scrape pool {', '.join(wrong)} has honorLabels: {not want}, but the "
                       f"rules read the {exporter.spelling} spelling (honorLabels: {want})",
                       f"scrape the exporter with honorLabels: {str(want).lower()} (its ServiceMonitor), or set "
                       f"scrape.labels: {'plain' if not want else 'exported'} and re-render")
    detail = (f"{len(ours)} exporter targets ({exporter.describe}; pool {', '.join(pools)}) scraped with "
              f"honorLabels: {str(want).lower()}, as the {exporter.spelling} spelling assumes")
    if exporter.spelling == "exported" and not exporter.namespace:
        return warning("exporter-scrape", detail + "; exporter.namespace is not set: a tenant's Service named "
                       "like the exporter's job would be counted", "set exporter.namespace to the namespace the "
                       "exporter pods run in (e.g. gpu-operator) and re-render")
    return ok("exporter-scrape", detail)


def dcgm_sources(base: str, exporter: Exporter, targets: list[dict[str, Any]]) -> Check:
    """No target but the exporter's serves DCGM_FI_* series: by the metadata each target reported, and by the
    target labels on the series themselves (the namespace only in the exported spelling)."""
    names = sorted({str(s["metric"].get("__name__", "")) for s in
                    prometheus_query(base, f"group by (__name__) ({DCGM})")})
    others: dict[tuple[str, str], str] = {}  # (job, instance) -> how the target reads
    for name in names[:64]:
        for entry in _metadata(base, name):
            labels = entry.get("target") or {}
            if not exporter.owns(labels):
                others[(labels.get("job", ""), labels.get("instance", ""))] = f"{_name(labels)} ({name})"
    by = "job, namespace" if exporter.spelling == "exported" else "job"
    for series in prometheus_query(base, f"count by ({by}, instance) ({DCGM})"):
        labels = series.get("metric") or {}
        if not exporter.owns(labels):
            others.setdefault((labels.get("job", ""), labels.get("instance", "")), _name(labels))
    if not others:
        return ok("dcgm-sources", f"{len(names)} DCGM_FI_* metrics, served only by the exporter's targets")
    named = "; ".join(text for _, text in sorted(others.items())[:5])
    more = f" (+{len(others) - 5} more)" if len(others) > 5 else ""
    return failing("dcgm-sources", f"{len(others)} other targets serve DCGM_FI_* series: {named}{more}; the rules "
                   "ignore them only while their target labels cannot be forged (honorLabels: false)",
                   "find the pod behind each target and drop it from the scrape (its ServiceMonitor/PodMonitor); "
                   "prometheus-operator: overrideHonorLabels: true keeps tenants' monitors from forging labels")


def _metadata(base: str, metric: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"metric": metric})
    body = get_json(f"{base.rstrip('/')}/api/v1/targets/metadata?{query}")
    return list(body.get("data") or []) if isinstance(body, dict) else []


def _name(labels: Mapping[str, str]) -> str:
    return " ".join(f"{k}={labels[k]}" for k in ("job", "namespace", "pod", "instance") if labels.get(k))
