"""GPUMetricsMissing reaches the reactor beside kube-prometheus-stack's InfoInhibitor.

The stack's default Alertmanager config mutes every `severity="info"` alert of a namespace while its
InfoInhibitor alert fires (there: info alerts and no warning). GPUMetricsMissing is the reactor's "hold";
muted, the reactor would act on the other signals of a container whose GPUs are not measured. So it is a
warning: shown here with the real Alertmanager, the stack's rule added to deploy/alertmanager's config.
"""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from tests.rules.conftest import REPO, require_tool
from tests.rules.test_alertmanager import LABELS, RunningAlertmanager, _config, running_alertmanager, wait

# kube-prometheus-stack's defaultRules / alertmanager.config (inhibit_rules), as shipped.
INFO_INHIBITOR = {"source_matchers": ["alertname = InfoInhibitor"], "target_matchers": ["severity = info"],
                  "equal": ["namespace"]}


def rendered_severity(alertname: str) -> str:
    groups = yaml.safe_load((REPO / "rules/gpu-reactor.rules.yaml").read_text())["groups"]
    (severity,) = {r["labels"]["severity"] for g in groups for r in g["rules"] if r.get("alert") == alertname}
    return str(severity)


def _post(am: RunningAlertmanager, labels: dict[str, str]) -> None:
    now = datetime.now(UTC)
    alert = {"labels": labels, "annotations": {"value": "NaN", "gpus": "1"},
             "startsAt": (now - timedelta(minutes=1)).isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat()}
    request = urllib.request.Request(f"{am.url}/api/v2/alerts", data=json.dumps([alert]).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


def test_the_rendered_severity_is_not_info() -> None:
    assert rendered_severity("GPUMetricsMissing") == "warning"


@pytest.mark.promstack
@pytest.mark.parametrize("severity, muted", [(rendered_severity("GPUMetricsMissing"), False), ("info", True)],
                         ids=["as-rendered", "info-would-be-muted"])
def test_metrics_missing_beside_the_info_inhibitor(tmp_path: Path, severity: str, muted: bool) -> None:
    binary = require_tool("prometheus-alertmanager")
    config = _config(group_wait="1s", group_interval="1s")
    config["inhibit_rules"].append(INFO_INHIBITOR)
    with running_alertmanager(binary, tmp_path / severity, config) as am:
        _post(am, {"alertname": "InfoInhibitor", "severity": "none", "namespace": LABELS["namespace"]})
        # Alertmanager's inhibitor learns of a source alert on its own subscription, after the POST has returned;
        # an info probe shown inhibited proves it has, so the alert under test meets a rule already in force.
        _post(am, {"alertname": "InhibitorProbe", "severity": "info", "namespace": LABELS["namespace"]})
        wait(lambda: bool(am.inhibited().get("InhibitorProbe")), timeout=10, what="the inhibitor holds its source")
        _post(am, {**LABELS, "alertname": "GPUMetricsMissing", "severity": severity})
        wait(lambda: "GPUMetricsMissing" in am.inhibited(), timeout=10, what="the alert is in Alertmanager")
        if not muted:
            wait(lambda: am.delivered("GPUMetricsMissing", "firing"), timeout=15, what="GPUMetricsMissing delivered")
            assert am.inhibited()["GPUMetricsMissing"] == []
        else:
            wait(lambda: bool(am.inhibited()["GPUMetricsMissing"]), timeout=10, what="GPUMetricsMissing inhibited")
            assert not am.delivered("GPUMetricsMissing", "firing")
