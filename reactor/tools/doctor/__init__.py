"""`reactor doctor`: a preflight that says why nothing would happen, one line per check.

It reads Prometheus, Alertmanager and the Kubernetes API, and never writes to any of them; the only
requests with a body are an unauthenticated POST to the reactor's webhook (answered 401 by the reactor) and,
with `--token-file`, the same empty body signed with the token (answered 400: refused, nothing acted on), unless
asked to `--send-test-alert`: then one alert the reactor ignores goes through Alertmanager. Bad arguments (a URL
without a scheme, a file that does not exist) are usage errors: one line, exit status 2.
With `rebalance.enabled` it also asks the Alertmanager the rebalancer asks (its configured URL, token and CA:
`GET /api/v2/status`, then the rebalancer's own `GET /api/v2/alerts`) and whether the donor alerts are loaded rules.
It always asks the Prometheus the reactor confirms alerts against (`confirm.prometheusUrl`, its token and CA:
does it answer, are the rules the policy acts on loaded there), and warns when `confirm.enabled` is false.
A source not given is reported as a warning ("not checked"), never silently skipped. Exit status 1 when
any check fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from reactor.config.settings import Settings, load_settings
from reactor.core.errors import ConfigError, ReactorError
from reactor.core.model import KNOWN_ALERTS
from reactor.tools.doctor import (
    alertmanager,
    cluster,
    confirm,
    delivery,
    prometheus,
    rebalance,
    signals,
    sources,
    token,
)
from reactor.tools.doctor.http import Unreachable
from reactor.tools.doctor.report import Check, exit_code, failing, line, warning

if TYPE_CHECKING:  # the client takes seconds to import: `reactor --version` and `--help` must not wait for it
    from reactor.cluster.kube import KubeGateway

DEFAULT_THRESHOLDS = Path("rules/thresholds.yaml")


@dataclass(frozen=True, slots=True)
class Sources:
    """Where to look. None means: not given, report the checks that need it as not checked."""

    prometheus: str | None = None
    alertmanager: str | None = None
    reactor_url: str | None = None
    thresholds: Path | None = None
    impersonate: str | None = None
    kubeconfig: str | None = None
    send_test_alert: bool = False  # the one check that writes: an alert to Alertmanager (delivery.py)
    reactor_metrics: tuple[str, ...] = ()  # each replica's probe port, where the test alert is seen arriving
    token_file: Path | None = None  # the webhook token, for a signed probe (token.py)


def prometheus_checks(url: str, thresholds: Path | None, *, probing: bool = False) -> Iterator[Check]:
    yield prometheus.dcgm_metrics(url)
    rules = prometheus.loaded_rules(url)
    configured, source = prometheus.spelling_of_rules(rules), "loaded rules"
    if configured is None and thresholds is not None:
        configured, source = _scrape_labels(thresholds), str(thresholds)
    yield prometheus.label_spelling(url, configured, source)
    yield prometheus.gpu_rules(url, rules)
    yield prometheus.shared_gpus(url, prometheus.arriving_spelling(url) or configured)
    yield from sources.scrape_checks(url, _exporter(rules, thresholds))
    counted = token.from_counters(url, probing=probing)
    if counted is not None:
        yield counted


def _exporter(rules: list[dict[str, Any]], thresholds: Path | None) -> sources.Exporter | None:
    """The exporter's targets as the loaded rules match them, else as the thresholds file renders them."""
    found = sources.exporter_of_rules(rules, prometheus.spelling_of_rules(rules))
    if found is None and thresholds is not None:
        from reactor.tools.rules import load_values

        values = load_values(thresholds)
        found = sources.Exporter(values.exporter_job, values.exporter_namespace, values.scrape_labels,
                                 str(thresholds))
    return found


def signal_checks(url: str, thresholds: Path | None, settings: Settings) -> Iterator[Check]:
    """The busy signal in use and its data, and the CPU half's cAdvisor series (signals.py)."""
    values = None
    if thresholds is not None:
        from reactor.tools.rules import load_values

        try:
            values = load_values(thresholds)
        except ConfigError as e:
            yield failing("busy-signal", f"{thresholds}: {e}", "fix the key it names (`reactor rules render` "
                          "checks the file too)")
            return
    yield from signals.signal_checks(url, values, settings.policy, str(thresholds))


def _scrape_labels(path: Path) -> str:
    from reactor.tools.rules import load_values

    return load_values(path).scrape_labels


def alertmanager_checks(
    url: str, settings: Settings, reactor_url: str | None, severities: dict[str, str]
) -> Iterator[Check]:
    config = alertmanager.loaded_config(url)
    labels = alertmanager.test_alert(settings.policy.allow[0] if settings.policy.allow else "default")
    yield alertmanager.route(config, labels)
    yield alertmanager.not_muted(config, labels["namespace"], severities)
    if reactor_url:
        yield alertmanager.reactor_reachable(config, labels, reactor_url)
    else:
        yield warning("reactor-webhook", "not checked", "pass --reactor-url (the URL Alertmanager posts to)")


def cluster_checks(kube: KubeGateway, settings: Settings, who: str) -> Iterator[Check]:
    yield from cluster.capabilities(kube, settings)
    yield from cluster.rbac(kube, settings, who)
    yield cluster.priority_classes(kube, settings)
    yield from cluster.bounds(kube, settings)


def alert_severities(url: str | None) -> dict[str, str]:
    """Each GPU alert's severity as loaded in Prometheus (the rules' `severity` label)."""
    if not url:
        return {}
    found: dict[str, str] = {}
    for rule in prometheus.loaded_rules(url):
        if rule.get("type") == "alerting" and rule.get("name") in KNOWN_ALERTS:
            found.setdefault(rule["name"], str((rule.get("labels") or {}).get("severity", "")))
    return found


def _guarded(name: str, fix: str, checks: Callable[[], Iterator[Check]]) -> list[Check]:
    """Run a group of checks; a source that stops answering is one failing line (after those it answered)."""
    found: list[Check] = []
    try:
        for check in checks():
            found.append(check)
    except (Unreachable, ReactorError) as e:
        found.append(failing(name, str(e), fix))
    return found


def diagnose(sources: Sources, settings: Settings, kube: KubeGateway | str) -> list[Check]:
    """Every check, in order; `kube` is a gateway, or why there is none."""
    checks: list[Check] = []
    probing = sources.token_file is not None and bool(sources.reactor_url)  # the signed probe proves the token
    if sources.prometheus:
        url = sources.prometheus
        checks += _guarded("prometheus", "pass the Prometheus URL (e.g. a port-forward to :9090)",
                           lambda: prometheus_checks(url, sources.thresholds, probing=probing))
        checks += _guarded("prometheus", "pass the Prometheus URL (e.g. a port-forward to :9090)",
                           lambda: signal_checks(url, sources.thresholds, settings))
    else:
        checks.append(warning("prometheus", "not checked: metrics, labels, rules, shared GPUs", "pass --prometheus"))
    if sources.alertmanager:
        am = sources.alertmanager
        severities = _severities(sources.prometheus, sources.thresholds)
        checks += _guarded("alertmanager", "pass the Alertmanager URL (e.g. a port-forward to :9093)",
                           lambda: alertmanager_checks(am, settings, sources.reactor_url, severities))
    else:
        checks.append(warning("alertmanager", "not checked: route, inhibition, webhook", "pass --alertmanager URL"))
    checks += _guarded(confirm.NAME, confirm.FIX, lambda: confirm.confirm_checks(settings))
    if settings.policy.rebalance_enabled:
        checks += rebalance_checks(sources.prometheus, settings)
    if sources.token_file is not None:
        if sources.reactor_url:
            alerts_url = alertmanager.alerts_url(sources.reactor_url)
            checks.append(token.signed_probe(alerts_url, sources.token_file))
        else:
            checks.append(failing(token.NAME, "not checked: --token-file needs --reactor-url", "pass --reactor-url"))
    if sources.send_test_alert:
        namespace = settings.policy.allow[0] if settings.policy.allow else "default"
        checks += _guarded(delivery.NAME, "pass the Alertmanager URL (e.g. a port-forward to :9093)",
                           lambda: iter(delivery.test_alert_checks(sources.alertmanager, sources.reactor_metrics,
                                                                   namespace)))
    if not isinstance(kube, str):
        who = sources.impersonate or "this client"
        gateway = kube
        checks += _guarded("kubernetes", "pass --kubeconfig, and --as to ask as the reactor's ServiceAccount",
                           lambda: cluster_checks(gateway, settings, who))
    elif sources.kubeconfig:
        checks.append(failing("kubernetes", kube, f"try: kubectl --kubeconfig {sources.kubeconfig} get ns"))
    else:
        checks.append(warning("kubernetes", f"not checked: RBAC, PriorityClasses, quota ({kube})", "pass --kubeconfig"))
    return checks


def rebalance_checks(prometheus_url: str | None, settings: Settings) -> list[Check]:
    """With `rebalance.enabled`: the Alertmanager the rebalancer asks (its configured URL and auth, not
    --alertmanager), and the donor alerts among Prometheus's loaded rules."""
    checks = _guarded(rebalance.SOURCE, rebalance.SOURCE_FIX, lambda: rebalance.source_checks(settings))
    if prometheus_url:
        url = prometheus_url
        checks += _guarded(rebalance.RULES, "pass the Prometheus URL (e.g. a port-forward to :9090)",
                           lambda: iter([rebalance.donor_rules(prometheus.loaded_rules(url),
                                                               settings.policy.rebalance_donor_alerts)]))
    else:
        checks.append(warning(rebalance.RULES, "not checked: are rebalance.donorAlerts loaded rules?",
                              "pass --prometheus"))
    return checks


_SECTIONS = {"GPUUnderutilized": "underutilized", "GPUIdle": "idle", "GPUSaturated": "saturated",
             "GPUMemorySaturated": "memorySaturated", "GPUMetricsMissing": "metricsMissing"}


def _severities(prometheus_url: str | None, thresholds: Path | None) -> dict[str, str]:
    """The GPU alerts' severities: as loaded in Prometheus, else as the thresholds file renders them."""
    try:
        found = alert_severities(prometheus_url)
    except Unreachable:
        found = {}
    if not found and thresholds is not None:
        from reactor.tools.rules import load_values

        defaults = load_values(thresholds).defaults
        found = {alert: defaults[section].severity for alert, section in _SECTIONS.items()}
    return found


def run_doctor(sources: Sources, *, config: str | None, out: TextIO | None = None) -> int:
    settings = load_settings(config)
    kube = connect_cluster(settings, sources.kubeconfig, sources.impersonate)
    try:
        checks = diagnose(sources, settings, kube)
    finally:
        if not isinstance(kube, str):
            kube.close()
    for check in checks:
        print(line(check), file=out or sys.stdout)
    return exit_code(checks)


def connect_cluster(settings: Settings, kubeconfig: str | None, impersonate: str | None) -> KubeGateway | str:
    """A gateway (in-cluster config, else the kubeconfig), or the reason there is none."""
    kube_settings = replace(settings.kube, kubeconfig=kubeconfig) if kubeconfig else settings.kube
    from prometheus_client import CollectorRegistry

    from reactor.cluster.kube import KubeGateway
    from reactor.core.metrics import Metrics

    try:
        kube = KubeGateway.connect(kube_settings, Metrics(CollectorRegistry()))
    except ConfigError as e:
        return str(e)
    if impersonate:
        kube.impersonate(impersonate)
    return kube


def http_url(text: str) -> str:
    """An http(s) URL with a host: `127.0.0.1:9090` (no scheme) is a usage error (exit 2), not N failing checks."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL, got {text!r} "
                                         f"(e.g. http://{rest or text})")
    return text


def existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `reactor doctor` flags (cli.py registers the subcommand and calls `run_command`)."""
    parser.add_argument("--prometheus", metavar="URL", type=http_url, help="Prometheus, e.g. http://127.0.0.1:9090")
    parser.add_argument("--alertmanager", metavar="URL", type=http_url,
                        help="Alertmanager, e.g. http://127.0.0.1:9093")
    parser.add_argument("--reactor-url", metavar="URL", type=http_url,
                        help="the webhook URL Alertmanager should post to")
    parser.add_argument("--token-file", metavar="FILE", type=existing_file,
                        help="the reactor's bearer token: checked with a signed probe (an empty notification the "
                             "reactor refuses with 400 when the token is right, 401 when not); nothing is sent on")
    parser.add_argument("--kubeconfig", metavar="FILE", help="the cluster (default: in-cluster, then ~/.kube/config)")
    parser.add_argument("--config", metavar="FILE", help="the reactor's policy file (allowed namespaces, ladder)")
    parser.add_argument("--thresholds", metavar="FILE", type=existing_file,
                        help="rules/thresholds.yaml: the busy signal in use, and the label spelling when the rules "
                             "are not loaded (default: it, if present)")
    parser.add_argument("--as", dest="impersonate", metavar="USER",
                        help="ask RBAC as this user, e.g. system:serviceaccount:gpu-reactor:gpu-reactor")
    parser.add_argument("--send-test-alert", action="store_true",
                        help=f"post a {delivery.TEST_ALERT} to --alertmanager and wait for the reactor to count it "
                             "(it acts on nothing); needs --reactor-metrics")
    parser.add_argument("--reactor-metrics", metavar="URL", action="append", default=[], type=http_url,
                        help="a reactor replica's probe port (/metrics), e.g. http://127.0.0.1:8081; once per replica")


def run_command(args: argparse.Namespace) -> int:
    thresholds = args.thresholds or (DEFAULT_THRESHOLDS if DEFAULT_THRESHOLDS.is_file() else None)
    sources = Sources(prometheus=args.prometheus, alertmanager=args.alertmanager, reactor_url=args.reactor_url,
                      thresholds=thresholds, impersonate=args.impersonate, kubeconfig=args.kubeconfig,
                      send_test_alert=args.send_test_alert, reactor_metrics=tuple(args.reactor_metrics),
                      token_file=args.token_file)
    return run_doctor(sources, config=args.config)
