"""The demo's Alertmanager stand-in (reactor/tools/alertmanager_api.py) answers as a real Alertmanager 0.25 does.

The same alerts are held by both: the stand-in's own gettableAlerts are posted to a real Alertmanager as
Prometheus posts them (`POST /api/v2/alerts`, postableAlerts: labels, annotations, startsAt, endsAt,
generatorURL). Then the same questions go to both — the reactor's own (sources/alertmanager.py `alerts_query`, both
namespace spellings), the include-flags, a receiver regex, a matcher that does not parse — and the answers must be
the same JSON, field for field, except `updatedAt` (when each received the alerts).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reactor.config.settings import AlertSource
from reactor.sources.alertmanager import NAMESPACE_LABELS, AlertmanagerAlerts, alerts_query
from reactor.tools.alertmanager_api import RECEIVER, AlertmanagerStandIn
from reactor.tools.payloads import AlertSpec
from tests.promstack.stack import get_json, lone_alertmanager

pytestmark = pytest.mark.promstack

DONORS = ("GPUIdle", "GPUUnderutilized")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")  # strfmt.DateTime (RFC3339Millis), UTC
# Alertmanager's routing names the receiver; the stand-in names the demo's (tools/payloads.py `notification`).
CONFIG = {"route": {"receiver": RECEIVER, "group_wait": "1h"}, "receivers": [{"name": RECEIVER}]}


def _specs(started: datetime) -> list[AlertSpec]:
    exported = {"exported_namespace": "ml-shared", "exported_pod": "training-1", "exported_container": "training"}
    return [
        AlertSpec("GPUIdle", "ml-shared", "training-0", "training", 0.03, 2, starts_at=started),
        # The exporter's own target labels win the plain names; the workload's are exported_*.
        AlertSpec("GPUUnderutilized", "gpu-operator", "nvidia-dcgm-exporter-abcde", "nvidia-dcgm-exporter", 0.2, 2,
                  starts_at=started, extra_labels=exported),
        AlertSpec("GPUSaturated", "ml-shared", "inference-0", "server", 0.97, 2, starts_at=started),
        AlertSpec("GPUIdle", "ml-workloads", "chat-0", "chat", 0.01, 1, starts_at=started),
        AlertSpec("GPUIdle", 'we"ird\\ns.*', "odd-0", "main", 0.02, 1, starts_at=started),
    ]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, AlertmanagerStandIn]]:
    with lone_alertmanager(tmp_path_factory.mktemp("stand-in"), CONFIG) as url, AlertmanagerStandIn() as stand_in:
        now = datetime.now(UTC)
        stand_in.fire(_specs(now - timedelta(minutes=20)), now)
        held = stand_in.alerts({})
        postable = [{k: a[k] for k in ("labels", "annotations", "startsAt", "endsAt", "generatorURL")}
                    for a in held]
        request = urllib.request.Request(f"{url}/api/v2/alerts", data=json.dumps(postable).encode(),
                                         method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5):
            pass
        yield url, stand_in


def _without_updated(answer: Any) -> Any:
    return [{k: v for k, v in a.items() if k != "updatedAt"} for a in answer] if isinstance(answer, list) else answer


QUESTIONS = [
    *(alerts_query(label, "ml-shared", DONORS) for label in NAMESPACE_LABELS),
    alerts_query("namespace", 'we"ird\\ns.*', DONORS),
    "/api/v2/alerts",
    "/api/v2/alerts?active=false",
    "/api/v2/alerts?silenced=false&inhibited=false&filter=alertname!~%22GPUIdle%22",
    "/api/v2/alerts?receiver=gpu-.%2A",
    "/api/v2/alerts?receiver=nobody",
    "/api/v2/alerts?filter=exported_namespace%3D%22%22",  # an empty value matches an absent label
    "/api/v2/alerts?filter=not+a+matcher",
    "/api/v2/alerts?filter=alertname%3D%22un%22closed%22",
]


@pytest.mark.parametrize("path", QUESTIONS)
def test_the_stand_in_answers_as_alertmanager_0_25(both: tuple[str, AlertmanagerStandIn], path: str) -> None:
    url, stand_in = both
    real_code, real = get_json(url + path)
    code, mine = get_json(stand_in.url + path)
    assert code == real_code, (real, mine)
    assert _without_updated(mine) == _without_updated(real)
    if isinstance(real, list):
        for theirs, ours in zip(real, mine, strict=True):
            assert sorted(ours) == sorted(theirs)  # every key, gettableAlert's and alert's, no more
            assert STAMP.match(ours["updatedAt"]) and STAMP.match(theirs["updatedAt"])


def test_the_reactors_alert_source_reads_the_same_alerts_from_both(both: tuple[str, AlertmanagerStandIn]) -> None:
    url, stand_in = both

    def firing(base: str) -> list[tuple[str, str | None, float | None, str]]:
        source = AlertmanagerAlerts(AlertSource(url=base, timeout=timedelta(seconds=5)))
        return [(a.name, a.pod, a.value, a.fingerprint) for a in source.firing("ml-shared", DONORS)]

    assert firing(stand_in.url) == firing(url)
    assert {pod for _, pod, _, _ in firing(stand_in.url)} == {"training-0", "training-1"}


def test_status_has_the_fields_the_doctor_reads(both: tuple[str, AlertmanagerStandIn]) -> None:
    url, stand_in = both
    (_, real), (_, mine) = get_json(f"{url}/api/v2/status"), get_json(f"{stand_in.url}/api/v2/status")
    assert sorted(mine) == sorted(real)
    assert sorted(mine["versionInfo"]) == sorted(real["versionInfo"])
    assert mine["cluster"]["status"] == real["cluster"]["status"] == "disabled"
    assert mine["versionInfo"]["version"] == real["versionInfo"]["version"].split("+")[0] == "0.25.0"
