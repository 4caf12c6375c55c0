"""values.schema.json's `policy` is generated from the reactor's settings schema, and the chart (Helm's own engine:
schema validation, then the templates' cross-field checks) accepts exactly the policies `reactor check-config` does.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from reactor.config import json_schema
from reactor.config.settings import _SCHEMA, build_settings
from reactor.core.errors import ConfigError
from tests.deploy.deploy_helpers import ROOT
from tests.helm.charts import CHART, render

SCHEMA_FILE = CHART / "values.schema.json"
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())


def test_the_committed_values_schema_is_the_generated_one() -> None:
    """Regenerate with `python -m reactor.config.json_schema --write deploy/helm/gpu-reactor/values.schema.json`."""
    text = SCHEMA_FILE.read_text()
    assert json_schema.render(json.loads(text)) == text


def test_the_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    stale = json.loads(SCHEMA_FILE.read_text())
    del stale["properties"]["policy"]["properties"]["cooldown"]
    path = tmp_path / "values.schema.json"
    path.write_text(json.dumps(stale))
    run = subprocess.run([sys.executable, "-m", "reactor.config.json_schema", "--check", str(path)],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert run.returncode == 1 and "stale" in run.stderr
    assert json_schema.main(["--write", str(path)]) == 0
    assert json_schema.main(["--check", str(path)]) == 0


def test_every_settings_key_is_in_the_schema() -> None:
    policy = json_schema.policy_schema()
    for path in _SCHEMA:
        node = policy
        for part in path.split("."):
            node = node["properties"][part]
        assert node, path


def _merged(override: Any, defaults: Any) -> Any:
    """Helm's coalescing of user values over values.yaml: maps merge, anything else replaces, null deletes."""
    if not isinstance(override, dict) or not isinstance(defaults, dict):
        return copy.deepcopy(override)
    out = copy.deepcopy(defaults)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(value, defaults.get(key))
    return out


def reactor_accepts(values: dict[str, Any]) -> bool:
    """`reactor check-config` on the policy file the chart would write (tests/helm/charts.py's render path:
    templates/_helpers.tpl "gpu-reactor.policy" sets the listeners from `ports`)."""
    merged = _merged(values, DEFAULTS)
    policy = merged["policy"]
    policy.setdefault("server", {}).update(listen=f"0.0.0.0:{merged['ports']['http']}",
                                           probeListen=f"0.0.0.0:{merged['ports']['metrics']}")
    try:
        build_settings(policy, environ={})
    except ConfigError:
        return False
    return True


def chart_accepts(values: dict[str, Any]) -> bool:
    try:
        render(values)
    except helm_python.HelmError:
        return False
    return True


GOOD: list[dict[str, Any]] = [
    {},
    {"namespaces": {"allow": ["*"]}},
    {"cooldown": "1h30m", "reverseAfter": "1h30m"},
    {"cooldown": 0},
    {"cooldown": "7d", "reverseAfter": "7d"},           # the maximum, written as a string
    {"cooldown": "0007d", "reverseAfter": "30d"},
    {"server": {"timeout": "10m", "notificationDeadline": "5m"}},
    {"cooldown": "0", "revertAfter": "500ms"},
    {"targetUtilization": 1},
    {"alerts": {"GPUIdle": ["hold"]}},
    {"gpus": {"min": 2, "max": 2}},
    {"replicas": {"min": 0, "max": 1}},
    {"cpu": {"max": "32", "step": "500m"}, "memory": {"max": "1Ti", "step": 0.5}},
    {"budget": {"global": {"actions": 0, "per": "1m"}}},
    {"finops": {"gpuHourlyCost": {"nvidia.com/gpu": 2.5}}},
    {"priorityLadder": ["a", "b"]},
    {"logging": {"level": "DEBUG", "format": "text"}},
    {"kube": {"qps": 5.5, "burst": 10}},
    {"server": {"tlsCert": "/tls/crt", "tlsKey": "/tls/key", "timeout": "30s", "notificationDeadline": "29s"}},
    {"adapters": {"builtin": []}},
    {"revert": []},
]
BAD: list[dict[str, Any]] = [
    {"dryrun": True},                                   # the typo
    {"cooldown": "30 minutes"},
    {"cooldown": 30},                                   # a bare number: Prometheus's syntax refuses it too
    {"cooldown": 600},
    {"cooldown": 700_000},                              # above 7d, as seconds
    {"cooldown": "8d"},                                 # above 7d, as a string (a bounded pattern)
    {"cooldown": "2w"},
    {"revertAfter": "169h"},
    {"server": {"timeout": "601s"}},
    {"server": {"notificationDeadline": "6m"}},
    {"targetUtilization": 5},
    {"defaultMode": "enforced"},
    {"alerts": {"GPUIdle": ["scale-replica-down"]}},    # strategy typo
    {"alerts": {"GPUIdel": ["hold"]}},                  # unknown alert
    {"alerts": {"GPUIdle": []}},
    {"gpus": {"min": 9, "max": 8}},
    {"gpus": {"min": 0}},
    {"gpus": {"min": 2.5}},
    {"replicas": {"min": 5, "max": 2}},
    {"reverseAfter": "10m"},                            # below the cooldown (30m)
    {"cooldown": "3h", "reverseAfter": "2h30m"},
    {"revert": ["hold"]},
    {"cpu": {"applyTo": "pod"}},
    {"cpu": {"throttledAbove": 0}},
    {"memory": {"max": "lots"}},
    {"priorityLadder": ["a", "a"]},
    {"server": {"notificationDeadline": "25s"}},        # not below server.timeout (25s)
    {"server": {"tlsCert": "/tls/crt"}},
    {"server": {"threads": 1000}},
    {"logging": {"level": "debug"}},
    {"budget": {"global": {"actions": 1, "per": "1m", "every": 2}}},
    {"finops": {"gpuHourlyCost": {"nvidia.com/gpu": -1}}},
    {"adapters": {"builtin": ["Foo"]}},
    {"kube": {"burst": 0}},
    {"namespaces": {"allow": ["Bad_Name"]}},
    {"gpuResource": "not a resource"},
]


@pytest.mark.parametrize("policy", GOOD, ids=lambda p: json.dumps(p)[:60])
def test_a_good_policy_renders_and_passes_check_config(policy: dict[str, Any]) -> None:
    values = {"policy": policy}
    assert reactor_accepts(values) and chart_accepts(values)


@pytest.mark.parametrize("policy", BAD, ids=lambda p: json.dumps(p)[:60])
def test_a_bad_policy_fails_both_the_chart_and_check_config(policy: dict[str, Any]) -> None:
    values = {"policy": policy}
    assert (reactor_accepts(values), chart_accepts(values)) == (False, False)


def test_equal_ports_fail_both() -> None:
    values = {"ports": {"http": 8081}}
    assert (reactor_accepts(values), chart_accepts(values)) == (False, False)
    with pytest.raises(helm_python.HelmError, match="ports.http and ports.metrics must differ"):
        render(values)


@pytest.mark.parametrize("policy, message", [
    ({"dryrun": True}, "dryrun"),
    ({"cooldown": "30 minutes"}, "/policy/cooldown"),
    ({"targetUtilization": 5}, "/policy/targetUtilization"),
    ({"alerts": {"GPUIdel": ["hold"]}}, "GPUIdel"),
    ({"gpus": {"min": 9, "max": 8}}, r"policy.gpus.min \(9\) must not exceed policy.gpus.max \(8\)"),
    ({"replicas": {"min": 5, "max": 2}}, r"policy.replicas.min \(5\) must not exceed"),
    ({"reverseAfter": "10m"}, r"policy.reverseAfter \(10m\) must be at least policy.cooldown \(30m\)"),
])
def test_the_render_names_the_key(policy: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmError, match=message):
        render({"policy": policy})


@pytest.mark.parametrize("cidr", ["10.0.0.0/33", "256.0.0.0/8", "10.0.0.1"])
def test_a_bad_api_server_cidr_is_refused(cidr: str) -> None:
    with pytest.raises(helm_python.HelmError, match="/networkPolicy/apiServerCIDRs/0"):
        render({"networkPolicy": {"apiServerCIDRs": [cidr]}})


@pytest.mark.parametrize("policy_file", ["deploy/reactor/policy.yaml", "reactor/tools/demo_data/policy.yaml"])
def test_the_shipped_policy_files_fit_the_plain_schema(policy_file: str) -> None:
    """`policy_schema()` (the policy file's own, without the chart's restrictions) takes the policies we ship."""
    import jsonschema

    path = ROOT / policy_file
    if not path.exists():
        pytest.skip(f"{policy_file} not in this checkout")
    jsonschema.Draft7Validator(json_schema.policy_schema()).validate(yaml.safe_load(path.read_text()))


def test_a_duration_whose_parts_add_up_past_the_bound_is_left_to_check_config() -> None:
    """The schema's pattern bounds each unit's number (`8d` > 7d is refused) but cannot add `7d` and `1h`: an
    exact pattern for "sum <= 7d" would need a state per millisecond of the range. check-config refuses it."""
    values = {"policy": {"cooldown": "7d1h", "reverseAfter": "30d"}}
    assert (reactor_accepts(values), chart_accepts(values)) == (False, True)


@pytest.mark.parametrize("limit", [0, 1, 7, 9, 10, 19, 100, 168, 300, 10080, 604800])
def test_at_most_pattern_is_exactly_the_numerals_up_to_the_limit(limit: int) -> None:
    """The RE2 pattern (alternation, classes, counted repeats only: same meaning in Python's re) against every
    value to 2000 and around the limit, with and without leading zeros."""
    import re

    from reactor.config.fields import at_most_pattern
    numeral = re.compile(f"^{at_most_pattern(limit)}$")
    for value in {*range(2000), limit - 1, limit, limit + 1, limit * 10, limit * 10 + 9}:
        if value >= 0:
            for text in (str(value), f"00{value}"):
                assert bool(numeral.match(text)) is (value <= limit), text
