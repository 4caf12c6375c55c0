"""MicroTime decoding, as kube-apiserver decodes a Lease: RFC 3339 with exactly six fractional digits.

Upstream: k8s.io/apimachinery/pkg/apis/meta/v1/micro_time.go `MicroTime.UnmarshalJSON` parses with
`time.Parse(RFC3339Micro, …)`; a failed decode is a 400 BadRequest worded by transformDecodeError
(staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go). Seen on a real v1.28 server:
`cannot parse "+00:00" as ".000000"` for a renewTime Python's isoformat() wrote at a whole second.
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor_sim import SimCluster
from reactor_sim.micro_time import parse_error
from tests.sim.helpers import send

LAYOUT = '"2006-01-02T15:04:05.000000Z07:00"'


def _lease(renew: Any, acquire: Any = "2026-03-01T12:00:00.000000Z") -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": "ml"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": acquire, "renewTime": renew}}


def _send(sim: SimCluster, method: str, body: dict[str, Any], name: str = "") -> tuple[int, dict[str, Any]]:
    path = "/apis/coordination.k8s.io/v1/namespaces/ml/leases" + (f"/{name}" if name else "")
    return send(sim, method, path, body)


@pytest.mark.parametrize(("value", "rest", "element"), [
    ("2026-03-01T12:00:00+00:00", "+00:00", ".000000"),  # Python's isoformat() at a whole second
    ("2026-03-01T12:00:00Z", "Z", ".000000"),  # RFC 3339 without a fraction
    ("2026-03-01T12:00:00.500Z", ".500Z", ".000000"),  # milliseconds: Go's .000000 takes exactly six digits
    ("2026-03-01T12:00:00.5000000Z", "0Z", "Z07:00"),  # seven digits: the seventh is where the zone should be
    ("2026-03-01T12:00:00.000000", "", "Z07:00"),  # no zone
])
def test_a_micro_time_without_exactly_six_fraction_digits_is_refused(sim: SimCluster, value: str, rest: str,
                                                                     element: str) -> None:
    code, status = _send(sim, "POST", _lease(value))
    assert code == 400 and status["reason"] == "BadRequest"
    assert status["message"] == (f'Lease in version "v1" cannot be handled as a Lease: parsing time "{value}" as '
                                 f'{LAYOUT}: cannot parse "{rest}" as "{element}"')
    assert sim.list("leases", "ml") == [], "nothing stored"


@pytest.mark.parametrize("value", ["2026-03-01T12:00:00.000000Z", "2026-03-01T12:00:00.000000+00:00",
                                   "2026-03-01T14:00:00.123456+02:00", None])
def test_rfc3339_micro_is_taken(sim: SimCluster, value: str | None) -> None:
    code, created = _send(sim, "POST", _lease(value))
    assert code == 201, created
    assert created["spec"]["renewTime"] == value


def test_an_update_is_decoded_the_same_way(sim: SimCluster) -> None:
    """PUT decodes its body like POST (update.go → transformDecodeError): the stored Lease is left as it was."""
    code, created = _send(sim, "POST", _lease("2026-03-01T12:00:00.000000Z"))
    assert code == 201
    body = {**created, "spec": {**created["spec"], "renewTime": "2026-03-01T12:00:15+00:00"}}
    code, status = _send(sim, "PUT", body, "l")
    assert code == 400 and 'cannot parse "+00:00" as ".000000"' in status["message"]
    assert sim.get("leases", "ml", "l")["spec"]["renewTime"] == "2026-03-01T12:00:00.000000Z"


def test_go_parse_edges() -> None:
    assert parse_error("2026-03-01T12:00:00,123456Z") is None, "Go takes a comma before the fraction too"
    assert parse_error("2026-03-01 12:00:00.000000Z") is not None
