"""The renderer: committed files match the values, drift is caught, bad values name their key."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reactor.core.errors import ConfigError
from reactor.tools.rules import PROMETHEUS_RULE_FILE, RULES_FILE, render_command, rule_groups
from reactor.tools.rules.values import build_values
from tests.rules.conftest import REPO, RULE_TESTS_DIR


def copy_repo_subset(dest: Path) -> Path:
    for rel in ("rules/thresholds.yaml", RULES_FILE, PROMETHEUS_RULE_FILE):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, dest / rel)
    return dest


def test_committed_rule_files_equal_the_render(capsys: pytest.CaptureFixture[str]) -> None:
    assert render_command(["render", "--check", "--root", str(REPO)]) == 0, capsys.readouterr().out


def test_check_fails_with_a_diff_when_the_values_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # From the rule tests' fixed values: the shipped rules/thresholds.yaml may be tuned to anything.
    root = tmp_path
    values = root / "rules/thresholds.yaml"
    values.parent.mkdir()
    shutil.copy(RULE_TESTS_DIR / "thresholds.yaml", values)
    assert render_command(["render", "--root", str(root)]) == 0
    values.write_text(values.read_text().replace("threshold: 0.30", "threshold: 0.25"))
    assert render_command(["render", "--check", "--root", str(root)]) == 1
    out = capsys.readouterr()
    assert "-      avg_over_time(gpu_reactor:container_gpu_utilization:ratio[30m]) < 0.3" in out.out
    assert "+      avg_over_time(gpu_reactor:container_gpu_utilization:ratio[30m]) < 0.25" in out.out
    assert "stale" in out.err
    # Rendering fixes it, and writes both files.
    assert render_command(["render", "--root", str(root)]) == 0
    assert render_command(["render", "--check", "--root", str(root)]) == 0
    assert "< 0.25" in (root / PROMETHEUS_RULE_FILE).read_text()


def test_check_fails_when_an_output_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_repo_subset(tmp_path)
    (root / PROMETHEUS_RULE_FILE).unlink()
    assert render_command(["render", "--check", "--root", str(root)]) == 1
    assert f"b/{PROMETHEUS_RULE_FILE} (rendered)" in capsys.readouterr().out


def test_prometheus_rule_wraps_the_same_groups_with_the_release_label() -> None:
    plain = yaml.safe_load((REPO / RULES_FILE).read_text())
    wrapped = yaml.safe_load((REPO / PROMETHEUS_RULE_FILE).read_text())
    assert wrapped["apiVersion"] == "monitoring.coreos.com/v1"
    assert wrapped["kind"] == "PrometheusRule"
    assert wrapped["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert wrapped["spec"] == plain
    assert "release" in (REPO / PROMETHEUS_RULE_FILE).read_text().split("apiVersion")[0]


def test_module_entry_point_works() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reactor.tools.rules", "render", "--check"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_namespace_override_gets_its_own_rule_and_the_default_excludes_it() -> None:
    values = build_values({"namespaces": {"a": {"idle": {"threshold": 0.01}}, "b": {"idle": {"for": "2h"}}}})
    idle = [r for r in rule_groups(values)["groups"][0]["rules"] if r.get("alert") == "GPUIdle"]
    assert [r["labels"].get("thresholds") for r in idle] == [None, "namespaces.a", "namespaces.b"]
    assert '{namespace!~"a|b"}' in idle[0]["expr"] and "< 0.02" in idle[0]["expr"]
    assert '{namespace="a"}' in idle[1]["expr"] and "< 0.01" in idle[1]["expr"] and idle[1]["for"] == "1h"
    assert '{namespace="b"}' in idle[2]["expr"] and "< 0.02" in idle[2]["expr"] and idle[2]["for"] == "2h"
    # Sections a namespace does not override keep a single rule.
    assert sum(r.get("alert") == "GPUSaturated" for r in rule_groups(values)["groups"][0]["rules"]) == 1


BAD_VALUES = [
    ({"defaults": {"idle": {"treshold": 0.1}}}, "defaults.idle.treshold", "unknown key"),
    ({"defaults": {"idle": {"threshold": 1.5}}}, "defaults.idle.threshold", "between 0 and 1"),
    ({"defaults": {"idle": {"threshold": "low"}}}, "defaults.idle.threshold", "ratio"),
    ({"defaults": {"saturated": {"window": "soon"}}}, "defaults.saturated.window", "duration"),
    ({"defaults": {"saturated": {"severity": "page"}}}, "defaults.saturated.severity", "one of"),
    ({"defaults": {"underutilized": {"window": "30s"}}}, "defaults.underutilized.window", "twice evaluationInterval"),
    ({"defaults": {"idle": {"threshold": 0.5}}}, "defaults.idle.threshold", "underutilized.threshold"),
    ({"defaults": {"underutilized": {"threshold": 0.96}}}, "defaults.underutilized.threshold", "saturated"),
    ({"defaults": {"metricsMissing": {"threshold": 0.1}}}, "defaults.metricsMissing.threshold", "unknown key"),
    ({"defaults": {"overloaded": {}}}, "defaults.overloaded", "unknown key"),
    ({"namespaces": {"Bad_NS": {}}}, "namespaces.Bad_NS", "namespace name"),
    ({"namespaces": {"ml": {"idle": {"threshold": 0.4}}}}, "namespaces.ml.idle.threshold", "underutilized"),
    ({"namespaces": {"ml": {"idle": {"for": -1}}}}, "namespaces.ml.idle.for", "duration"),
    ({"staleAfter": "0s"}, "staleAfter", "longer than 0s"),
    ({"runbookUrl": "docs/runbooks.md"}, "runbookUrl", "URL"),
    ({"prometheusRule": {"labels": {"release": 3}}}, "prometheusRule.labels.release", "strings"),
    ({"thresholds": {}}, "thresholds", "unknown key"),
    ({"scrape": {"labels": "auto"}}, "scrape.labels", "one of exported, plain"),
    ({"scrape": {"honorLabels": True}}, "scrape.honorLabels", "unknown key"),
    ({"exporter": {"container": ".*"}}, "exporter.container", "every container"),
    ({"exporter": {"container": "dcgm|"}}, "exporter.container", "every container"),
    ({"exporter": {"container": "dcgm-(exporter"}}, "exporter.container", "regular expression"),
    ({"exporter": {"container": 'a"b'}}, "exporter.container", "without quotes"),
    ({"exporter": {"container": ""}}, "exporter.container", "regular expression"),
    ({"kubeStateMetrics": {"enabled": "yes"}}, "kubeStateMetrics.enabled", "true or false"),
    ([], "(top)", "mapping"),
]


@pytest.mark.parametrize(("doc", "key", "problem"), BAD_VALUES, ids=[k for _, k, _ in BAD_VALUES])
def test_bad_values_name_the_key(doc: object, key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        build_values(doc)
    assert excinfo.value.key == key
    assert problem in excinfo.value.problem


def test_the_command_prints_the_key_of_a_bad_values_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = tmp_path / "thresholds.yaml"
    values.write_text("defaults:\n  idle:\n    treshold: 0.1\n")
    assert render_command(["render", "--values", str(values), "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "defaults.idle.treshold: unknown key" in err
    assert not (tmp_path / RULES_FILE).exists()


def test_an_empty_values_file_renders_the_defaults() -> None:
    assert rule_groups(build_values(None)) == rule_groups(build_values({}))


def _expr(values: object, name: str) -> str:
    rules = rule_groups(build_values(values))["groups"][0]["rules"]
    (rule,) = [r for r in rules if r.get("record") == name or r.get("alert") == name]
    return str(rule["expr"])


def test_the_exported_spelling_reads_only_exported_labels() -> None:
    """The dcgm-exporter chart's default (honor_labels false): a series without exported_pod is a free GPU
    whose plain labels name the exporter itself, never a workload."""
    for name in ("gpu_reactor:gpu_utilization:ratio", "gpu_reactor:gpu_fb_used:ratio"):
        expr = _expr({}, name)
        assert 'exported_pod!=""' in expr and 'pod!=""' not in expr.replace('exported_pod!=""', "")
        assert _expr({"scrape": {"labels": "exported"}}, name) == expr
    assert build_values({}).scrape_labels == "exported"


def test_the_plain_spelling_never_reads_the_exporters_own_container() -> None:
    expr = _expr({"scrape": {"labels": "plain"}}, "gpu_reactor:gpu_utilization:ratio")
    assert 'container!~"nvidia-dcgm-exporter|dcgm-exporter|exporter"' in expr
    assert 'container!=""' in expr and "exported_" not in expr
    custom = _expr({"scrape": {"labels": "plain"}, "exporter": {"container": "gpu-metrics"}}, "gpu_reactor:gpu_fb_used:ratio")
    assert 'container!~"gpu-metrics"' in custom and 'container!~"nvidia-dcgm-exporter' not in custom


def test_kube_pod_info_is_read_only_when_enabled() -> None:
    assert "kube_pod_info" not in yaml.safe_dump(rule_groups(build_values({})))
    expr = _expr({"kubeStateMetrics": {"enabled": True}}, "GPUMetricsMissing")
    assert "and on (namespace, pod)\n  group by (namespace, pod) (kube_pod_info)" in expr
    assert "unless on ()\n  group (kube_pod_info)" in expr  # kube-state-metrics down: the exporter's data decides
    assert _expr({"kubeStateMetrics": {"enabled": False}}, "GPUMetricsMissing") == _expr({}, "GPUMetricsMissing")


def test_the_committed_rules_keep_the_dashboards_series() -> None:
    recorded = {r["record"] for r in yaml.safe_load((REPO / RULES_FILE).read_text())["groups"][0]["rules"] if "record" in r}
    assert recorded >= {
        "gpu_reactor:container_gpu_utilization:ratio", "gpu_reactor:container_gpus:count",
        "gpu_reactor:container_idle_gpus:count", "gpu_reactor:container_gpu_fb_used:max_ratio",
        "gpu_reactor:gpu_utilization:ratio", "gpu_reactor:gpu_fb_used:ratio",
    }
