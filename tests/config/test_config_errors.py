"""Configuration errors as a person meets them: all at once, each named by its source, with a "did you mean";
durations as written; the policy reference's bounds (docs/policy.md) are the parser's; warnings for a policy that acts nowhere."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.app.cli import EXIT_CODES, main
from reactor.config.fields import format_duration, parse_duration
from reactor.config.settings import _SCHEMA, load_settings
from reactor.core.errors import ConfigError

pytestmark = pytest.mark.unit

POLICY = (Path(__file__).parents[2] / "docs" / "policy.md").read_text()


def check_config(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    status = main(["check-config", str(path)])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_file_with_three_errors_reports_three(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = check_config(tmp_path, "cooldown: soon\ntargetUtilization: 2\ngpus: {min: 0}\n", capsys)
    assert status == 2
    lines = err.splitlines()
    assert lines[0] == "reactor check-config: invalid configuration, 3 problems:"
    path = tmp_path / "policy.yaml"
    assert [line.split(": ")[1] for line in lines[1:]] == ["cooldown", "targetUtilization", "gpus.min"]
    assert all(line.startswith(f"  {path}: ") for line in lines[1:])


def test_inconsistent_values_are_reported_with_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One run names every problem, the cross-field ones too (fixing one to be shown the next wastes an hour)."""
    status, _, err = check_config(tmp_path, "gpus: {min: 4, max: 2}\nreverseAfter: 10m\ndryRun: maybe\n"
                                            "server: {listen: ':9000', probeListen: ':9000'}\n", capsys)
    assert status == 2
    assert "4 problems" in err and "dryRun: expected true or false" in err
    assert "gpus.min: must not exceed gpus.max (2)" in err and "reverseAfter: must be at least the cooldown (30m)" in err
    assert "server.probeListen: must use another port than server.listen (:9000)" in err


def test_a_cross_field_check_on_an_invalid_value_is_left_to_that_value(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`gpus.max: lots` is named; `gpus.min: 4` is not compared with the default standing in for it."""
    status, _, err = check_config(tmp_path, "gpus: {min: 4, max: lots}\n", capsys)
    assert status == 2 and "gpus.max" in err and "must not exceed" not in err, err


@pytest.mark.parametrize("text,expected", [
    ("colldown: 5m\n", "colldown: unknown key; did you mean 'cooldown'?"),
    ("server: {tokenfile: /t}\n", "server.tokenfile: unknown key; did you mean 'server.tokenFile'?"),
    ("servre: {listen: ':80'}\n", "servre: unknown key; did you mean 'server'?"),
    ("targetUtilisation: 0.5\n", "targetUtilisation: unknown key; did you mean 'targetUtilization'?"),
    ("frobnicate: 1\n", "frobnicate: unknown key (see docs/policy.md, the policy reference)"),
], ids=["top", "nested", "section", "spelling", "nothing-close"])
def test_a_misspelled_key_gets_a_suggestion(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                            expected: str) -> None:
    status, _, err = check_config(tmp_path, text, capsys)
    assert status == 2
    assert expected in err


def test_a_misspelled_variable_is_reported_not_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_TARGET_UTILISATION", "0.5")
    status, out, err = check_config(tmp_path, "namespaces: {allow: [a]}\n", capsys)
    assert (status, out) == (2, "")
    assert "REACTOR_TARGET_UTILISATION: unknown variable; did you mean 'REACTOR_TARGET_UTILIZATION'?" in err


def test_a_value_from_the_environment_is_named_by_its_variable(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("cooldown: 5m\nbudget: {global: {actions: 3, per: 1m}}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {"REACTOR_COOLDOWN": "soon", "REACTOR_BUDGET__GLOBAL": "{actions: -1, per: 1m}"})
    assert str(caught.value).splitlines() == [
        "REACTOR_COOLDOWN: expected a duration like '500ms', '30s', '10m', '2h' or '7d', got 'soon'",
        "REACTOR_BUDGET__GLOBAL: budget.global.actions: must be between 0 and 10000, got -1",
    ]


def test_a_star_in_the_environment_allows_every_namespace() -> None:
    settings = load_settings(None, {"REACTOR_NAMESPACES__ALLOW": "*"})
    assert settings.policy.allow == ("*",)
    assert settings.policy.namespace_allowed("anything") and not settings.policy.namespace_allowed("kube-system")


@pytest.mark.parametrize("written", ["30m", "1h30m", "7d", "500ms", "1d12h", "0s", "2h"])
def test_durations_are_printed_as_written(written: str) -> None:
    assert format_duration(parse_duration("k", written)) == written


def test_a_duration_bound_is_printed_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = check_config(tmp_path, "cooldown: 8d\n", capsys)
    assert "cooldown: must be between 0s and 7d, got '8d'" in err
    assert "day" not in err and "0:00" not in err


def _bounds() -> list[tuple[str, str, str, str]]:
    """(key, part, low, high) for every `low–high` in the bounds column of docs/policy.md's table."""
    found = []
    for line in POLICY.split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        keys = re.findall(r"`([A-Za-z.]+)`", cells[0]) if len(cells) == 4 else []
        if len(keys) != 1 or keys[0] not in _SCHEMA:
            continue
        for part, low, high in re.findall(r"(?:(\w+) )?([\d.]+(?: ?[a-zA-Z]+)?)–([\d.]+(?: ?[a-zA-Z]+)?)", cells[2]):
            found.append((keys[0], part, low, high))
    return found


def _value(written: str) -> Any:
    number = re.fullmatch(r"([\d.]+) (KiB|MiB)", written)
    if number:
        return int(number[1]) << (10 if number[2] == "KiB" else 20)
    return yaml.safe_load(written)


def _beyond(value: Any) -> Any:
    if isinstance(value, str):
        return format_duration(parse_duration("k", value) + timedelta(seconds=1))
    return value + 1 if isinstance(value, int) else value * 1.01


def _parse(key: str, part: str, value: Any) -> Any:
    return _SCHEMA[key][2](key, {part: value, **({"per": "1m"} if part == "actions" else {"actions": 1})}
                           if part else value)


def test_the_readme_table_has_bounds_to_check() -> None:
    assert len(_bounds()) >= 15


@pytest.mark.parametrize("key,part,low,high", _bounds(), ids=lambda v: str(v))
def test_every_bound_in_the_readme_is_accepted_and_is_the_limit(key: str, part: str, low: str, high: str) -> None:
    _parse(key, part, _value(low))
    _parse(key, part, _value(high))
    with pytest.raises(ConfigError):
        _parse(key, part, _beyond(_value(high)))


def test_an_empty_file_is_valid_but_warned_about(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = check_config(tmp_path, "", capsys)
    assert status == 0 and ": ok (allow=[]" in out
    assert "warning: namespaces.allow is empty: the reactor acts in no namespace" in err


@pytest.mark.parametrize("text,warning", [
    ("namespaces: {allow: [ml], deny: [ml]}\n", "every namespace in namespaces.allow is also denied"),
    ("namespaces: {allow: ['*']}\nbudget: {global: {actions: 0, per: 1m}}\n", "budget.global.actions is 0"),
], ids=["all-denied", "no-budget"])
def test_a_policy_that_acts_nowhere_is_warned_about(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                                    warning: str) -> None:
    status, _, err = check_config(tmp_path, text, capsys)
    assert status == 0 and f"warning: {warning}" in err


def test_a_policy_that_acts_is_not_warned_about(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "namespaces: {allow: [ml]}\nconfirm: {prometheusUrl: 'http://prometheus.monitoring:9090'}\n"
    status, _, err = check_config(tmp_path, text, capsys)
    assert (status, err) == (0, "")


def test_the_help_says_the_exit_status_check_config_returns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    codes = {int(m[1]): m[2] for m in re.finditer(r"^\s+(\d+)\s+(.*)$", EXIT_CODES, re.M)}
    assert "invalid configuration" in codes[2] and "valid" in codes[0]
    assert check_config(tmp_path, "dryRun: maybe\n", capsys)[0] == 2
    assert check_config(tmp_path, "dryRun: true\n", capsys)[0] == 0
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "exit status:" in capsys.readouterr().out


@pytest.mark.parametrize("raw", [30, 600, -5])
def test_a_duration_without_a_unit_is_refused_with_the_fix(raw: int) -> None:
    """`cooldown: 30` was silently 30 seconds; Prometheus, whose duration syntax the policy follows, refuses a
    bare number. The message says how to write what was meant."""
    with pytest.raises(ConfigError, match=f"a duration needs a unit: write '{raw}s' for seconds or '{raw}m'"):
        parse_duration("cooldown", raw)


def test_check_config_refuses_a_bare_number_for_a_duration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reactor.app.cli import main

    path = tmp_path / "policy.yaml"
    path.write_text("namespaces: {allow: [ml-workloads]}\ncooldown: 30\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "cooldown: a duration needs a unit: write '30s' for seconds or '30m' for minutes" in err, err
    assert parse_duration("cooldown", 0) == timedelta(0)
