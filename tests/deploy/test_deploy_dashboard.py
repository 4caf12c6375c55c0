"""The Grafana dashboard: loads, is generated, and queries only metrics that exist."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.deploy_helpers import DEPLOY, ROOT

GRAFANA = DEPLOY / "grafana"
# What the reactor exports (reactor/core/metrics.py); histograms add their three series. The process collector's
# series come from the reactor's own registry too.
REACTOR_METRICS = {
    "reactor_alerts_received_total",
    "reactor_alerts_truncated_total",
    "reactor_actions_total",
    "reactor_alerts_skipped_total",
    "reactor_workload_skips_total",
    "reactor_gpus_changed_total",
    "reactor_webhook_requests_total",
    "reactor_webhook_duration_seconds_bucket",
    "reactor_webhook_duration_seconds_sum",
    "reactor_webhook_duration_seconds_count",
    "reactor_kube_requests_total",
    "reactor_budget_used",
    "reactor_budget_limit",
    "reactor_build_info",
    "reactor_verifications_total",
    "reactor_gpus_released",
    "reactor_gpus_added",
    "reactor_gpu_seconds_saved_total",
    "reactor_gpu_cost_saved_total",
    "reactor_verifications_pending",
    "reactor_verifier_leader",
    "reactor_cache_objects",
    "reactor_cache_synced",
    "process_resident_memory_bytes",
}
# Recording rules (level:metric:operations) must be recorded in rules/*.rules.yaml.
RECORDING = re.compile(r"^gpu_reactor:[a-z0-9_]+:[a-z0-9_]+$")
MUST_SHOW = REACTOR_METRICS - {"reactor_webhook_duration_seconds_sum", "reactor_webhook_duration_seconds_count"} | {
    "gpu_reactor:container_gpu_utilization:ratio",
    "gpu_reactor:container_gpus:count",
    "gpu_reactor:container_idle_gpus:count",
}


def recorded() -> set[str]:
    names = set()
    for path in sorted((ROOT / "rules").glob("*.rules.yaml")):
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            names.update(r["record"] for r in group["rules"] if "record" in r)
    return names


RECORDED = recorded()
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "and", "or", "unless", "inf", "nan",
}


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords or labels."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)  # label lists
    text = re.sub(r"\$\w+|\$\{\w+\}", "", text)  # Grafana variables
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or m.group().lower() in PROMQL_WORDS:
            continue
        if re.match(r"\d", text[m.start() - 1: m.start()] or " "):
            continue  # part of a number like 1e3
        names.add(m.group())
    return names


def _allowed(name: str) -> bool:
    return name in REACTOR_METRICS or (bool(RECORDING.match(name)) and name in RECORDED)


def test_rules_record_the_series_the_dashboard_needs() -> None:
    assert RECORDED, "no recording rules found in rules/*.rules.yaml"
    assert {n for n in MUST_SHOW if RECORDING.match(n)} <= RECORDED


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads((GRAFANA / "gpu-reactor-dashboard.json").read_text(encoding="utf-8"))


def _panels(d: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in d["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def _queries(d: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in _panels(d) for t in p.get("targets", [])]
    for var in d["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]["query"]
            # label_values(metric, label): only the first argument is a PromQL selector.
            m = re.fullmatch(r"label_values\(([^,]+),\s*\w+\)", q)
            assert m, f"unexpected variable query {q!r}"
            exprs.append(m.group(1).strip())
    return exprs


def test_committed_json_is_the_generators_output(dashboard: dict[str, Any]) -> None:
    spec = importlib.util.spec_from_file_location("grafana_generate", GRAFANA / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (GRAFANA / "gpu-reactor-dashboard.json").read_text(encoding="utf-8") == module.render(), \
        "run: python deploy/grafana/generate.py"


def test_schema_and_variables(dashboard: dict[str, Any]) -> None:
    assert dashboard["schemaVersion"] == 39 and dashboard["uid"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["namespace"]["type"] == "query" and variables["namespace"]["includeAll"] is True


def test_every_panel_and_query_uses_the_datasource_variable(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in _panels(dashboard)]
    assert len(ids) == len(set(ids))
    for p in _panels(dashboard):
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"] and t["expr"] and t["refId"]


def test_queries_use_only_known_metrics(dashboard: dict[str, Any]) -> None:
    for expr in _queries(dashboard):
        names = metric_names(expr)
        assert names, f"no metric found in {expr!r}"
        unknown = {n for n in names if not _allowed(n)}
        assert not unknown, f"unknown metrics {unknown} in {expr!r}"


def test_every_topic_is_shown(dashboard: dict[str, Any]) -> None:
    used = set().union(*(metric_names(e) for e in _queries(dashboard)))
    assert used >= MUST_SHOW, f"not shown: {MUST_SHOW - used}"
    exprs = " ".join(_queries(dashboard))
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.99," in exprs


def test_namespaced_metrics_follow_the_namespace_variable(dashboard: dict[str, Any]) -> None:
    for expr in _queries(dashboard):
        for name in metric_names(expr) & {"reactor_actions_total", "reactor_gpus_changed_total"}:
            assert re.search(re.escape(name) + r'\{[^}]*namespace=~"\$namespace"', expr), expr


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le) (rate(foo_bucket{code=~"5.."}[5m]))', {"foo_bucket"}),
        ("histogram_quantile(0.99, x) / on (a) group_left y", {"x", "y"}),
        ("gpu_reactor:a:b", {"gpu_reactor:a:b"}),
        ("rate(reactor_actoins_total[$__rate_interval]) > 1e3", {"reactor_actoins_total"}),
    ],
)
def test_metric_name_extraction(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed")
def test_queries_parse_as_promql(dashboard: dict[str, Any], tmp_path: Path) -> None:
    exprs = [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]
    concrete = [
        e.replace("$__rate_interval", "1m").replace("$__range", "1h").replace("$namespace", ".*") for e in exprs
    ]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": e} for i, e in enumerate(concrete)]}]}
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
