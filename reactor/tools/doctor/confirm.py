"""Doctor checks for the confirm step: can the reactor ask the Prometheus it confirms alerts against (its configured
URL, token and CA), and are the rules the policy acts on loaded there (else every alert is `unconfirmed`)?

It asks through the reactor's own client (sources/prometheus.py): `GET /api/v1/status/buildinfo`, then the very
question the confirm step asks (`GET /api/v1/rules?type=alert`). Nothing is written. With `confirm.enabled: false`
it warns: the reactor then trusts whoever can reach Alertmanager's API.
"""

from __future__ import annotations

from collections.abc import Iterator

from reactor.config.settings import Settings
from reactor.core.errors import PrometheusUnavailable, ReactorError
from reactor.core.model import TEST_ALERT
from reactor.sources.prometheus import PrometheusApi
from reactor.tools.doctor.report import Check, failing, ok, warning

NAME = "confirm"
FIX = ("set confirm.prometheusUrl to the Prometheus the rules run in, as seen from the reactor's pod (e.g. "
       "http://kube-prometheus-stack-prometheus.monitoring:9090), with confirm.tokenFile / caFile when a proxy guards "
       "it, and allow the egress (the chart does)")


def confirm_checks(settings: Settings) -> Iterator[Check]:
    source = settings.confirm
    if not source.enabled:
        yield warning(NAME, "confirm.enabled is false: alerts are acted on unconfirmed, so the reactor trusts whoever "
                            "can reach Alertmanager's API (anyone who can post an alert there can resize any allowed "
                            "workload)", "set confirm.prometheusUrl and drop confirm.enabled: false (docs/confirm.md)")
        return
    if source.url is None:
        yield failing(NAME, "confirm.prometheusUrl is not set: reactor serve refuses to start", FIX)
        return
    try:
        api = PrometheusApi(source.url, token_file=source.token_file, ca_file=source.ca_file, timeout=source.timeout,
                            key="confirm.prometheusUrl")
    except ReactorError as e:
        yield failing(NAME, str(e), FIX)
        return
    try:
        version = api.buildinfo().get("version", "unknown")
        groups = api.rules()
    except PrometheusUnavailable as e:
        yield failing(NAME, f"{e.reason} (every notification would be answered 503: nothing acted on)",
                      FIX + "; run the doctor where the reactor runs, or through a port-forward with "
                            "REACTOR_CONFIRM__PROMETHEUS_URL=http://127.0.0.1:9090")
        return
    finally:
        api.close()
    yield ok(NAME, f"{api.url} answers with the configured auth: Prometheus {version}")
    loaded = {r.name for g in groups for r in g.rules}
    acted = sorted(n for n, strategies in settings.policy.alerts.items()
                   if n != TEST_ALERT and any(s != "hold" for s in strategies))
    missing = [n for n in acted if n not in loaded]
    if missing:
        yield failing(f"{NAME}-rules", f"{', '.join(missing)} not among the alerting rules loaded in {api.url}: every "
                                       "such alert would be answered unconfirmed",
                      "load the reactor's rules in that Prometheus (`reactor rules render`, or the chart's "
                      "prometheusRule), or point confirm.prometheusUrl at the Prometheus that runs them")
    else:
        yield ok(f"{NAME}-rules", f"the alerts the policy acts on ({', '.join(acted)}) are loaded alerting rules there")
