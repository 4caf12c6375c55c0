"""Doctor checks that ask Alertmanager: would a GPU alert reach a webhook, the reactor's, and not be muted.

Reads the running config from /api/v2/status (never a local file: what is loaded is what routes), re-enacts
the routing (`routing`), and, given the reactor's URL, knocks on its door without credentials.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from reactor.tools.doctor.http import Unreachable, get_json, post_status
from reactor.tools.doctor.prometheus import ALERTS
from reactor.tools.doctor.report import Check, failing, ok, warning
from reactor.tools.doctor.routing import Matcher, deliveries, inhibited_by, near_misses, parse_matcher, receiver

ROUTE_FIX = ("add the route and receiver of deploy/alertmanager/alertmanager.yaml (matchers ['reactor=\"gpu\"'] to a "
             "webhook to http://gpu-reactor.gpu-reactor.svc:8080/alerts), or the chart's AlertmanagerConfig")
MATCHER_FIX = ("with prometheus-operator's AlertmanagerConfig, set alertmanagerConfigMatcherStrategy.type: None on the "
               "Alertmanager (kube-prometheus-stack: alertmanager.alertmanagerSpec.alertmanagerConfigMatcherStrategy)")


def loaded_config(base: str) -> dict[str, Any]:
    body = get_json(f"{base.rstrip('/')}/api/v2/status")
    original = body.get("config", {}).get("original", "") if isinstance(body, dict) else ""
    config = yaml.safe_load(original) if original else None
    if not isinstance(config, dict):
        raise Unreachable(f"{base}/api/v2/status: no config in the answer")
    return config


def test_alert(namespace: str, alertname: str = "GPUUnderutilized", severity: str = "warning") -> dict[str, str]:
    return {"alertname": alertname, "reactor": "gpu", "namespace": namespace, "pod": "doctor-test-0",
            "container": "main", "severity": severity}


def webhook_urls(config: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    urls = []
    for d in deliveries(config.get("route") or {}, labels):
        urls += [str(w.get("url", "")) for w in receiver(config, d.receiver).get("webhook_configs") or []]
    return urls


def route(config: Mapping[str, Any], labels: Mapping[str, str]) -> Check:
    names = sorted({d.receiver for d in deliveries(config.get("route") or {}, labels)})
    urls = webhook_urls(config, labels)
    where = f"reactor=\"gpu\" alerts in {labels['namespace']} go to {', '.join(names)}"
    if urls:
        return ok("alertmanager-route", f"{where} ({', '.join(urls)})")
    misses = near_misses(config.get("route") or {}, labels)
    detail = f"{where}, which has no webhook"
    if misses:
        blocking = ", ".join(sorted({str(m) for path in misses for m in path if not m.admits(labels)}))
        return failing("alertmanager-route", f"{detail}; a reactor route is blocked by {blocking}", MATCHER_FIX)
    return failing("alertmanager-route", detail, ROUTE_FIX)


def _ours(rule: Mapping[str, Any]) -> bool:
    """An inhibit rule whose source is one of the GPU alerts is the reactor's own design (deploy/alertmanager)."""
    sources = " ".join(str(m) for m in rule.get("source_matchers") or []) + str(rule.get("source_match") or "")
    return any(name in sources for name in ALERTS)


def _source_can_fire(rule: Mapping[str, Any], target: Mapping[str, str], severities: Mapping[str, str]) -> bool:
    """Whether some alert could be the rule's source for this target. Alertmanager mutes the target only while a
    source alert fires whose `equal` labels have the target's values (inhibit.go, InhibitRule.hasEqual). With
    `alertname` among them, the source is an alert of the same name: one of ours, whose severity is known, so a rule
    like kube-prometheus-stack's critical->warning (`equal: [namespace, alertname]`) can never fire for a warning
    GPU alert. Without `alertname` in `equal`, any other alert may be the source: assume it can."""
    if "alertname" not in (rule.get("equal") or []) or target["alertname"] not in severities:
        return True
    source = {name: target.get(name, "") for name in rule.get("equal") or []}
    source.update(reactor="gpu", severity=severities[target["alertname"]])
    matchers = [parse_matcher(m) for m in rule.get("source_matchers") or []]
    matchers += [Matcher(k, "=", str(v)) for k, v in (rule.get("source_match") or {}).items()]
    matchers += [Matcher(k, "=~", str(v)) for k, v in (rule.get("source_match_re") or {}).items()]
    return all(m.admits({**target, **source}) for m in matchers)


def not_muted(config: Mapping[str, Any], namespace: str, severities: Mapping[str, str]) -> Check:
    """Inhibit rules from outside the reactor's set (kube-prometheus-stack's InfoInhibitor) that mute a GPU alert."""
    if not severities:
        return warning("alert-inhibition", "not checked: the alerts' severities are unknown",
                       "pass --prometheus with the rules loaded, or --thresholds")
    muted = []
    for alertname, severity in sorted(severities.items()):
        target = test_alert(namespace, alertname, severity)
        for rule in inhibited_by(config, target):
            if _ours(rule) or not _source_can_fire(rule, target, severities):
                continue
            source = rule.get("source_matchers") or rule.get("source_match")
            muted.append(f"{alertname} (severity {severity}) by {source}")
    if muted:
        return warning("alert-inhibition", f"inhibit rules can mute: {'; '.join(muted)}",
                       "a muted alert never reaches the reactor (and a muted resolve is lost): give it another "
                       "severity or exclude reactor=\"gpu\" from the inhibit rule's target_matchers")
    return ok("alert-inhibition", f"no inhibit rule mutes {', '.join(sorted(severities))} as configured")


def reactor_reachable(config: Mapping[str, Any], labels: Mapping[str, str], reactor_url: str) -> Check:
    wanted = alerts_url(reactor_url)
    urls = [u.rstrip("/") for u in webhook_urls(config, labels)]
    if wanted not in urls:
        return failing("reactor-webhook", f"the GPU route delivers to {', '.join(urls) or 'no webhook'}, not {wanted}",
                       f"set the gpu-reactor receiver's webhook url to {wanted}")
    try:
        status = post_status(wanted)
    except Unreachable as e:
        return warning("reactor-webhook", f"the route delivers to {wanted}, but it does not answer from here: {e}",
                       "run the doctor where Alertmanager runs, or port-forward the reactor's Service")
    if status == 401:
        return ok("reactor-webhook", f"the route delivers to {wanted}; it answers 401 without the token, as it should")
    if 200 <= status < 300:
        return warning("reactor-webhook", f"the route delivers to {wanted}, which answered {status} without a token",
                       "is that the reactor? The reactor refuses requests without the bearer token (401)")
    return failing("reactor-webhook", f"the route delivers to {wanted}, which answered {status}",
                   "point the receiver at the reactor's Service, path /alerts")


def alerts_url(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/alerts") else f"{url}/alerts"
