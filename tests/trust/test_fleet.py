"""Issue 12, fleets: an alert for another cluster is never acted on here (policy key `cluster`).

A central Alertmanager serving several clusters can misroute, and the same namespace and pod names
exist in every cluster. With `cluster: gpu-east`, an alert labelled `cluster="gpu-west"` is skipped
`other-cluster` before any API call; an alert labelled `gpu-east`, or with no `cluster` label at
all (a Prometheus without that external label), is handled as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor
from tests.trust.tenant import deployed_reactor


@pytest.fixture
def east(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = deployed_reactor(sim, token_file, cluster="gpu-east")
    try:
        yield r
    finally:
        r.service.kube.close()


def _post(r: Reactor, pod: str, **labels: str) -> dict[str, str]:
    spec = AlertSpec("GPUSaturated", NAMESPACE, pod, "trainer", 0.99, 2, extra_labels=labels)
    (outcome,) = r.post(notification([spec])).get_json()["outcomes"]
    return dict(outcome)


def test_an_alert_for_another_cluster_is_skipped_without_an_api_call(east: Reactor, sim: SimCluster) -> None:
    pod = east.pods("trainer")[0]
    sim.reset_counters()
    o = _post(east, pod, cluster="gpu-west")
    assert (o["result"], o["reason"]) == ("skipped", "other-cluster"), o
    assert sum(sim.requests.values()) == 0
    assert east.metric("reactor_alerts_skipped_total", reason="other-cluster") == 1


@pytest.mark.parametrize("labels", [{"cluster": "gpu-east"}, {}], ids=["this-cluster", "no-cluster-label"])
def test_this_cluster_and_unlabelled_alerts_are_handled(east: Reactor, sim: SimCluster, labels: dict[str, str]) -> None:
    o = _post(east, east.pods("trainer")[0], **labels)
    assert o["result"] == "applied", o
