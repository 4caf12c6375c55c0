"""Issue 35, promise 1: a boost survives its resolve no more — the resolve reverts from the reactor's own copy.

The tenant (RBAC: get/patch Deployments in its namespace, through the official client) puts back an older record
the reactor signed for the same Deployment, or removes the record. Before, the resolve was refused (`stale-state` /
`state-reset`), the boost was kept, and with the older record every later decision was refused until the tenant
restored the latest. Now the state ledger (the Lease `gpu-reactor/gpu-reactor-state`, which the tenant can neither
read nor write) keeps the reactor's copy of its latest record, and every decision is made on that copy
(reactor/state/ledger_codec.py `judged`): the resolve reverts the change the copy names, and the reactor's next
write puts its own record back on the Deployment.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL, VERIFICATION
from reactor.state.ledger_codec import LEDGER_KEY, decode
from reactor.state.seal import STATE_MAC, parse_mac
from reactor.tools.payloads import AlertSpec
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor
from tests.trust.tenant import LEDGER, deployed_reactor, outcome_of, why

RECORD = (LAST_ACTION, COOLDOWN_UNTIL, ORIGINAL, VERIFICATION, STATE_MAC)


def _outcome(reactor: Reactor, pod: str, started: datetime, status: str = "firing") -> dict[str, Any]:
    return outcome_of(reactor, AlertSpec("GPUSaturated", NAMESPACE, pod, "server", 0.99, 4, status=status,
                                         starts_at=started))


def _apps(tenant: k8s.ApiClient) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(tenant)


def _record(tenant: k8s.ApiClient) -> dict[str, str | None]:
    annotations = _apps(tenant).read_namespaced_deployment("llm-inference", NAMESPACE).metadata.annotations or {}
    return {k: annotations.get(k) for k in RECORD}


def _put_back(tenant: k8s.ApiClient, record: dict[str, str | None]) -> None:
    _apps(tenant).patch_namespaced_deployment("llm-inference", NAMESPACE, {"metadata": {"annotations": record}})


def _replicas(sim: SimCluster) -> int:
    return int(sim.get("deployments", NAMESPACE, "llm-inference")["spec"]["replicas"])


def _reactors_own(sim: SimCluster) -> dict[str, Any]:
    """The Deployment's record, asserted to be the one the ledger names as the reactor's latest write."""
    meta = sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]
    parsed = parse_mac(meta["annotations"].get(STATE_MAC))
    entries = decode(sim.get("leases", *LEDGER)["metadata"]["annotations"][LEDGER_KEY])
    assert parsed is not None and entries[meta["uid"]].write == parsed[1]
    return json.loads(meta["annotations"][LAST_ACTION])


def test_an_older_record_put_back_neither_blocks_the_revert_nor_freezes_the_workload(
        boosting: Reactor, sim: SimCluster, tenant: k8s.ApiClient) -> None:
    """Boost 3 → 4 (record R1, kept by the tenant), reverted; boost again 3 → 4; R1 put back. The resolve of the
    second boost reverts it (4 → 3) from the ledger's copy, and the Deployment carries the reactor's record again;
    a later firing is decided as any other (3 → 4), not refused `stale-state` until the tenant gives in."""
    pod = boosting.pods("llm-inference")[0]
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    assert _outcome(boosting, pod, first)["to"] == 4
    r1 = _record(tenant)
    sim.settle()
    assert _outcome(boosting, pod, first, "resolved")["action"] == "revert"
    sim.settle()
    second = first + timedelta(hours=1)
    assert _outcome(boosting, pod, second)["to"] == 4
    sim.settle()
    _put_back(tenant, r1)
    o = _outcome(boosting, pod, second, "resolved")
    assert (o["result"], o.get("action"), o.get("from"), o.get("to")) == ("applied", "revert", 4, 3), why(o)
    assert _replicas(sim) == 3
    assert _reactors_own(sim)["action"] == "revert"
    sim.settle()
    _put_back(tenant, r1)  # again: a firing is not refused on it either
    o = _outcome(boosting, pod, second + timedelta(hours=1))
    assert (o["result"], o.get("from"), o.get("to")) == ("applied", 3, 4), why(o)
    assert _reactors_own(sim)["to"] == 4
    assert boosting.metric("reactor_workload_skips_total", reason="stale-state") == 0


def test_the_record_removed_does_not_block_the_revert(boosting: Reactor, sim: SimCluster,
                                                      tenant: k8s.ApiClient) -> None:
    """Boost 3 → 4, the tenant deletes every key of the reactor's record; the resolve reverts 4 → 3 from the
    ledger's copy (it used to be `state-reset`, the boost kept), and writes the reactor's record back."""
    pod = boosting.pods("llm-inference")[0]
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    assert _outcome(boosting, pod, started)["to"] == 4
    sim.settle()
    _put_back(tenant, dict.fromkeys(RECORD))
    o = _outcome(boosting, pod, started, "resolved")
    assert (o["result"], o.get("action"), o.get("from"), o.get("to")) == ("applied", "revert", 4, 3), why(o)
    assert _replicas(sim) == 3
    assert _reactors_own(sim)["action"] == "revert"
    assert boosting.metric("reactor_workload_skips_total", reason="state-reset") == 0


def test_a_removed_record_keeps_its_cooldown(sim: SimCluster, token_file: Path, tenant: k8s.ApiClient) -> None:
    """Removing the record is no fresh start: the copy's cooldown (30m, the deployed policy's) still holds."""
    r = deployed_reactor(sim, token_file)
    try:
        pod = r.pods("llm-inference")[0]
        started = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
        assert _outcome(r, pod, started)["to"] == 4
        sim.settle()
        _put_back(tenant, dict.fromkeys(RECORD))
        o = _outcome(r, pod, started + timedelta(minutes=1))
        assert (o["result"], o["reason"]) == ("skipped", "cooldown"), why(o)
        assert _replicas(sim) == 4
    finally:
        r.service.kube.close()
