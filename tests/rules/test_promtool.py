"""The rendered rules against the real promtool, and the alert contract with the reactor."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reactor.tools.rules import RULES_FILE, render_to
from tests.rules.conftest import REPO, RULE_TESTS_DIR
from tests.rules.rule_files import (
    CONTRACT_ANNOTATIONS,
    CONTRACT_LABELS,
    KNOWN_ALERTS,
    WORKLOAD_LABELS,
    alert_cases,
    alert_rules,
    render_with_tests,
)

RULE_FILE = REPO / RULES_FILE
# Every rules/tests/*.test.yaml runs against the render of rules/tests/thresholds.yaml (fixed values), never
# against the shipped rules: tuning rules/thresholds.yaml changes the shipped rules, not what these tests pin.
TEST_FILES = sorted(RULE_TESTS_DIR.glob("*.test.yaml"))
TEST_VALUES = RULE_TESTS_DIR / "thresholds.yaml"
# Other values (scrape.labels: plain, kubeStateMetrics): each folder's thresholds.yaml is rendered into
# a temporary directory, where its *.test.yaml files run next to the rendered gpu-reactor.rules.yaml.
VARIANTS = sorted(p for p in (RULE_TESTS_DIR / "variants").iterdir() if p.is_dir())
VARIANT_TEST_FILES = sorted(f for v in VARIANTS for f in v.glob("*.test.yaml"))


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_there_are_promtool_test_files() -> None:
    assert len(TEST_FILES) >= 3


def test_promtool_check_rules_accepts_the_committed_rules(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(RULE_FILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_check_rules_accepts_the_fast_test_rules(promtool: str, tmp_path: Path) -> None:
    rendered = render_to(RULE_TESTS_DIR / "thresholds-fast.yaml", tmp_path)
    result = run(promtool, "check", "rules", str(rendered))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def rule_tests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder where the test files sit next to `../gpu-reactor.rules.yaml` rendered from TEST_VALUES."""
    return render_with_tests(TEST_VALUES, TEST_FILES, tmp_path_factory.mktemp("rule-tests"))


def test_promtool_check_rules_accepts_the_rules_the_tests_pin(promtool: str, rule_tests: Path) -> None:
    result = run(promtool, "check", "rules", str(rule_tests.parent / RULES_FILE.name))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("test_file", TEST_FILES, ids=[p.name for p in TEST_FILES])
def test_promtool_unit_tests_pass(promtool: str, test_file: Path, rule_tests: Path) -> None:
    assert "rule_files: [../gpu-reactor.rules.yaml]" in test_file.read_text(), "tests must name the rendered rules"
    result = run(promtool, "test", "rules", str(rule_tests / test_file.name))
    assert result.returncode == 0, result.stdout + result.stderr


def test_there_are_variant_test_files() -> None:
    assert {v.name for v in VARIANTS} >= {"plain", "kube-state-metrics"}
    assert all(list(v.glob("*.test.yaml")) and (v / "thresholds.yaml").exists() for v in VARIANTS)


def render_variant(variant: Path, root: Path) -> Path:
    rule_file = render_to(variant / "thresholds.yaml", root)
    for test_file in variant.glob("*.test.yaml"):
        shutil.copy(test_file, rule_file.parent / test_file.name)
    return rule_file


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_promtool_unit_tests_pass_for_other_values(promtool: str, variant: Path, tmp_path: Path) -> None:
    rule_file = render_variant(variant, tmp_path)
    checked = run(promtool, "check", "rules", str(rule_file))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tests = sorted(str(rule_file.parent / f.name) for f in variant.glob("*.test.yaml"))
    result = run(promtool, "test", "rules", *tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_expectation_fails_promtool(promtool: str, rule_tests: Path) -> None:
    """Guards the guard: the test files really constrain the rules (a changed value fails)."""
    source = (RULE_TESTS_DIR / "utilization.test.yaml").read_text()
    assert 'value: "0.200"' in source
    broken = rule_tests / "broken.test.yaml"
    broken.write_text(source.replace('value: "0.200"', 'value: "0.201"'))
    assert run(promtool, "test", "rules", str(broken)).returncode != 0


def test_every_alert_of_the_contract_is_defined_and_no_other() -> None:
    assert {r["alert"] for r in alert_rules(RULE_FILE)} == KNOWN_ALERTS


@pytest.mark.parametrize("rule", alert_rules(RULE_FILE), ids=lambda r: f"{r['alert']}-{r['labels'].get('thresholds', 'default')}")
def test_every_alert_rule_carries_the_contract_labels_and_annotations(rule: dict) -> None:
    assert set(rule["labels"]) >= CONTRACT_LABELS
    assert rule["labels"]["reactor"] == "gpu"
    assert rule["labels"]["severity"] in {"info", "warning", "critical"}
    assert set(rule["annotations"]) >= CONTRACT_ANNOTATIONS
    assert "$value" in rule["annotations"]["value"]
    if rule["alert"] != "GPUMetricsMissing":
        assert "idle_gpus" in rule["annotations"]
    # The result keeps the workload labels: aggregated by them, never beyond.
    assert "on (namespace, pod, container)" in rule["expr"]


def test_every_alertname_in_the_test_files_exists_in_the_rules() -> None:
    """promtool passes a misspelled alertname with `exp_alerts: []` silently."""
    defined = {r["alert"] for r in alert_rules(RULE_FILE)}
    used = {case["alertname"] for f in TEST_FILES for _, case in alert_cases(f)}
    assert used - defined == set()
    assert used == defined, f"alerts never tested: {defined - used}"
    in_variants = {case["alertname"] for f in VARIANT_TEST_FILES for _, case in alert_cases(f)}
    assert in_variants and in_variants - defined == set()


def test_every_expected_alert_names_the_workload_and_checks_every_annotation() -> None:
    checked = 0
    for test_file in TEST_FILES + VARIANT_TEST_FILES:
        for name, case in alert_cases(test_file):
            for alert in case.get("exp_alerts") or []:
                where = f"{test_file.name}: {name} @ {case['eval_time']}"
                assert set(alert["exp_labels"]) >= WORKLOAD_LABELS | CONTRACT_LABELS, where
                assert set(alert.get("exp_annotations", {})) >= CONTRACT_ANNOTATIONS, where
                assert not any(k.startswith("exported_") for k in alert["exp_labels"]), where
                checked += 1
    assert checked >= 10


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for test_file in TEST_FILES:
        for _, case in alert_cases(test_file):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    assert firing == KNOWN_ALERTS
    assert quiet == KNOWN_ALERTS
