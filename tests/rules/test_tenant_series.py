"""Series the rules trust (issue 23, item 5): only the exporter's own scrape targets count.

A tenant's pod can serve series named DCGM_FI_* whose `exported_pod` names another team's pod; the rules tell
them apart by the target labels Prometheus sets (`job`, and `namespace` in the exported spelling). The promtool
case rules/tests/tenant-series.test.yaml pins that such series fire nothing; here the same case against rules
that read every target fails, so the case can fail, and every raw DCGM selector of every render carries the
matchers.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.core.errors import ConfigError
from reactor.tools.rules import rule_groups
from reactor.tools.rules.output import dump
from reactor.tools.rules.values import build_values
from tests.rules.conftest import REPO, RULE_TESTS_DIR
from tests.rules.rule_files import render_with_tests

CASE = RULE_TESTS_DIR / "tenant-series.test.yaml"
RAW = re.compile(r"\b(DCGM_FI_[A-Z_]+)(\{[^}]*\})?")


def _promtool(promtool: str, values: dict[str, Any], root: Path) -> subprocess.CompletedProcess[str]:
    path = root / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    tests = render_with_tests(path, [CASE], root / "render")
    return subprocess.run([promtool, "test", "rules", str(tests / CASE.name)], capture_output=True, text=True,
                          timeout=60, check=False)


def _test_values() -> dict[str, Any]:
    return dict(yaml.safe_load((RULE_TESTS_DIR / "thresholds.yaml").read_text(encoding="utf-8")))


def test_a_tenants_series_fire_nothing_for_another_team(promtool: str, tmp_path: Path) -> None:
    result = _promtool(promtool, _test_values(), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_that_read_every_target_fire_for_the_victim(promtool: str, tmp_path: Path) -> None:
    """The control: with any target counted (job `.+`, no namespace) the tenant's series fire GPUIdle for
    team-a/victim and GPUUnderutilized for team-a/busy, and share its real GPU."""
    values = _test_values()
    values["exporter"] = {"job": ".+", "namespace": ""}
    result = _promtool(promtool, values, tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "alertname: GPUIdle" in out and 'pod="victim"' in out
    assert "alertname: GPUUnderutilized" in out and 'pod="busy"' in out
    assert 'pod="victim-2"' in out  # a Service named like the exporter's: only the namespace tells it apart


@pytest.mark.parametrize("doc", [
    {},
    {"exporter": {"job": "dcgm", "namespace": "gpu-operator"}},
    {"exporter": {"job": "", "namespace": "gpu-operator"}},
    {"scrape": {"labels": "plain"}, "exporter": {"job": "dcgm"}},
    {"signal": "sm_active", "namespaces": {"legacy": {"signal": "gpu_util"}}, "exporter": {"namespace": "gpu-op"}},
], ids=["defaults", "job-and-namespace", "namespace-only", "plain", "signals"])
def test_every_raw_dcgm_selector_carries_the_exporter_targets(doc: dict[str, Any]) -> None:
    values = build_values(doc)
    text = dump(rule_groups(values))
    found = RAW.findall(text)
    assert found
    for name, braces in found:
        assert braces, f"{name} read without matchers"
        if values.exporter_job:
            assert f'job=~"{values.exporter_job}"' in braces, (name, braces)
        if values.exporter_namespace:
            assert f'namespace=~"{values.exporter_namespace}"' in braces, (name, braces)


def test_the_shipped_rules_and_the_charts_copy_read_only_the_exporters_job() -> None:
    for rel in ("rules/gpu-reactor.rules.yaml", "deploy/helm/gpu-reactor/files/gpu-reactor.rules.yaml"):
        found = RAW.findall((REPO / rel).read_text(encoding="utf-8"))
        assert found and all('job=~"nvidia-dcgm-exporter|dcgm-exporter"' in braces for _, braces in found), rel


BAD = [
    ({"exporter": {"job": "", "namespace": ""}}, "exporter.job", "both empty"),
    ({"exporter": {"job": ".*"}}, "exporter.job", "every target"),
    ({"exporter": {"namespace": 'gpu"op'}}, "exporter.namespace", "without quotes"),
    ({"exporter": {"job": "dcgm-(exporter"}}, "exporter.job", "regular expression"),
    ({"scrape": {"labels": "plain"}, "exporter": {"namespace": "gpu-operator"}}, "exporter.namespace",
     "scrape.labels: exported"),
]


@pytest.mark.parametrize(("doc", "key", "problem"), BAD, ids=[p for _, _, p in BAD])
def test_exporter_targets_that_cannot_tell_the_exporter_apart_are_refused(doc: object, key: str,
                                                                          problem: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        build_values(doc)
    assert excinfo.value.key == key
    assert problem in excinfo.value.problem
