"""Issue 23, items 1-4: only the reactor's latest record counts, keys are re-read, a malformed MAC stops nothing.

The tenant (RBAC: get/patch Deployments in its namespace, through the official client) keeps copies of the
records the reactor wrote on its Deployment and puts one back later (a replay: its MAC is genuine), or deletes
the record (a reset). The reactor runs with the deployed policy, so its state ledger is the Lease
`gpu-reactor/gpu-reactor-state` (deploy/reactor/policy.yaml), which the tenant can neither read nor write.
Each test shows the attack as the issue measured it and what the reactor does now: the ledger also keeps the
reactor's own copy of its latest record, and the decision is made on that copy, whatever the workload carries
(a replayed or removed record neither writes its old values nor blocks the revert).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL, VERIFICATION
from reactor.state.ledger_codec import LEDGER_KEY, decode
from reactor.state.seal import STATE_MAC, StateKeys, load_state_keys, parse_mac
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec, fingerprint, notification, rfc3339
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor, files_checked
from tests.trust.tenant import (
    BOOSTING,
    LEDGER,
    MinuteClock,
    deployed_reactor,
    outcome_of,
    sign_as_reactor,
    template_of,
    why,
)

RECORD = (LAST_ACTION, COOLDOWN_UNTIL, ORIGINAL, VERIFICATION, STATE_MAC)


def _spec(pod: str, started: datetime, status: str = "firing", alert: str = "GPUSaturated",
          value: float | None = 0.99) -> AlertSpec:
    return AlertSpec(alert, NAMESPACE, pod, "server", value, 4, status=status, starts_at=started)


def _apps(tenant: k8s.ApiClient) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(tenant)


def _record(tenant: k8s.ApiClient, name: str = "llm-inference") -> dict[str, str | None]:
    """What the tenant can read of the reactor's record (every key, None where absent): its copy to replay."""
    annotations = _apps(tenant).read_namespaced_deployment(name, NAMESPACE).metadata.annotations or {}
    return {k: annotations.get(k) for k in RECORD}


def _put_back(tenant: k8s.ApiClient, record: dict[str, str | None], name: str = "llm-inference") -> None:
    """The tenant's patch: the saved record, keys absent then deleted now (a merge patch's null)."""
    _apps(tenant).patch_namespaced_deployment(name, NAMESPACE, {"metadata": {"annotations": record}})


def _replicas(sim: SimCluster, name: str = "llm-inference") -> int:
    return int(sim.get("deployments", NAMESPACE, name)["spec"]["replicas"])


@pytest.fixture
def keys(token_file: Path) -> StateKeys:
    found = load_state_keys(str(state_key_file(token_file.parent)), None)
    assert found is not None
    return found


def test_every_write_is_named_in_the_ledger_the_tenant_cannot_touch(boosting: Reactor, sim: SimCluster,
                                                                   tenant: k8s.ApiClient) -> None:
    pod = boosting.pods("llm-inference")[0]
    assert outcome_of(boosting, _spec(pod, datetime.now(UTC)))["result"] == "applied"
    written = sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]
    parsed = parse_mac(written["annotations"][STATE_MAC])
    assert parsed is not None and parsed[0] == "v2"
    entries = decode(sim.get("leases", *LEDGER)["metadata"]["annotations"][LEDGER_KEY])
    assert entries[written["uid"]].write == parsed[1]
    with pytest.raises(k8s.ApiException) as refused:  # the tenant's Role reaches neither the namespace nor Leases
        k8s.CoordinationV1Api(tenant).read_namespaced_lease(LEDGER[1], LEDGER[0])
    assert refused.value.status == 403


def test_a_replayed_boost_record_cannot_make_a_resolve_write_its_old_value(boosting: Reactor, sim: SimCluster,
                                                                          tenant: k8s.ApiClient) -> None:
    """The issue's measurement: boost 3 → 4 (record R1, kept by the tenant), reverted; the team scales to 1; a
    later boost 1 → 2; R1 put back; the resolve wrote R1's original, 2 → 3. Now the resolve reverts the later boost
    from the ledger's copy, 2 → 1, and R1 is replaced by the reactor's own record."""
    pod = boosting.pods("llm-inference")[0]
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
    assert outcome_of(boosting, _spec(pod, first))["to"] == 4
    r1 = _record(tenant)
    sim.settle()
    assert outcome_of(boosting, _spec(pod, first, "resolved"))["action"] == "revert"
    _apps(tenant).patch_namespaced_deployment("llm-inference", NAMESPACE, {"spec": {"replicas": 1}})
    sim.settle()
    later = first + timedelta(hours=1)
    o = outcome_of(boosting, _spec(pod, later))
    assert (o["result"], o.get("from"), o.get("to")) == ("applied", 1, 2), why(o)
    sim.settle()
    _put_back(tenant, r1)
    o = outcome_of(boosting, _spec(pod, later, "resolved"))
    assert (o["result"], o.get("action"), o.get("from"), o.get("to")) == ("applied", "revert", 2, 1), why(o)
    assert _replicas(sim) == 1
    assert boosting.metric("reactor_workload_skips_total", reason="stale-state") == 0


def test_a_replayed_revert_record_does_not_hide_a_later_boost(boosting: Reactor, sim: SimCluster,
                                                             tenant: k8s.ApiClient) -> None:
    """The revert record R2 put back over a later boost's record: the resolve answered `nothing-to-revert` (the
    last action a revert) as if nothing were wrong. Now the later boost is reverted from the ledger's copy."""
    pod = boosting.pods("llm-inference")[0]
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
    assert outcome_of(boosting, _spec(pod, first))["result"] == "applied"
    sim.settle()
    assert outcome_of(boosting, _spec(pod, first, "resolved"))["action"] == "revert"
    r2 = _record(tenant)
    sim.settle()
    later = first + timedelta(hours=1)
    o = outcome_of(boosting, _spec(pod, later))
    assert o["result"] == "applied", why(o)
    sim.settle()
    before = sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["generation"]
    _put_back(tenant, r2)
    o = outcome_of(boosting, _spec(pod, later, "resolved"))
    assert (o["result"], o.get("action"), o.get("from"), o.get("to")) == ("applied", "revert", 4, 3), why(o)
    assert sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["generation"] == before + 1


def test_the_latest_record_put_back_counts_again(boosting: Reactor, sim: SimCluster, tenant: k8s.ApiClient) -> None:
    """A removed record is no lock-out, and neither is the latest one put back: with it removed the resolve
    reverts from the ledger's copy; put back (now an older record, unknown to the ledger once the revert's windows
    are over) it is no record at all, and nothing is written."""
    pod = boosting.pods("llm-inference")[0]
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    assert outcome_of(boosting, _spec(pod, started))["result"] == "applied"
    latest = _record(tenant)
    _put_back(tenant, dict.fromkeys(RECORD))
    sim.settle()
    o = outcome_of(boosting, _spec(pod, started, "resolved"))
    assert (o["result"], o.get("action"), o.get("to")) == ("applied", "revert", 3), why(o)
    _put_back(tenant, latest)
    o = outcome_of(boosting, _spec(pod, started, "resolved"))
    assert (o["result"], o["reason"]) == ("skipped", "resolved"), why(o)
    assert _replicas(sim) == 3


def test_deleting_the_state_does_not_reset_the_cooldown(reactor: Reactor, sim: SimCluster,
                                                        tenant: k8s.ApiClient) -> None:
    """The deployed policy (cooldown 30m): boost 3 → 4, the tenant deletes the reactor's annotations, and the
    same alert fires again. It used to be a fresh start (4 → 5 inside the cooldown); the ledger's copy keeps the
    cooldown (`cooldown`), and the resolve is decided on the copy too (scale-replicas-up is not reverted by the
    deployed policy: `resolved`)."""
    pod = reactor.pods("llm-inference")[0]
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    assert outcome_of(reactor, _spec(pod, started))["result"] == "applied"
    sim.settle()
    _put_back(tenant, dict.fromkeys(RECORD))
    again = outcome_of(reactor, _spec(pod, started + timedelta(minutes=1)))
    assert (again["result"], again["reason"]) == ("skipped", "cooldown"), again
    resolved = outcome_of(reactor, _spec(pod, started, "resolved"))
    assert (resolved["result"], resolved["reason"]) == ("skipped", "resolved"), resolved
    assert _replicas(sim) == 4
    assert reactor.metric("reactor_workload_skips_total", reason="state-reset") == 0


def test_a_record_signed_but_unknown_to_the_ledger_is_no_record(reactor: Reactor, sim: SimCluster,
                                                                keys: StateKeys) -> None:
    """A genuine MAC the ledger never named (its windows over and its entry pruned, or older than the one it
    lost): treated as absent, so the workload is decided as a fresh one, never by that record."""
    pod = reactor.pods("llm-inference")[0]
    obj = sim.get("deployments", NAMESPACE, "llm-inference")
    cooldown = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj["metadata"]["annotations"].update(keys.sealed(obj["metadata"]["uid"], {COOLDOWN_UNTIL: cooldown}))
    sim.apply(obj)
    o = outcome_of(reactor, _spec(pod, datetime.now(UTC) - timedelta(minutes=1)))
    assert (o["result"], o["to"]) == ("applied", 4), why(o)


def test_a_revert_restores_the_value_from_before_its_own_change(sim: SimCluster, token_file: Path) -> None:
    """No tenant: shrink 4 → 3 GPUs (unreverted), then a boost 3 → 4. `original` kept 4 from before the shrink,
    so the boost's resolve found `gpus is already 4` and the boost survived it. Now it writes back 3."""
    policy = {**BOOSTING, "revert": ["resize-gpu-up"], "alerts": {"GPUUnderutilized": ["resize-gpu-down"],
                                                                 "GPUMemorySaturated": ["resize-gpu-up"]}}
    r = deployed_reactor(sim, token_file, clock=MinuteClock(), **policy)
    try:
        pod = r.pods("llm-inference")[0]
        started = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
        o = outcome_of(r, _spec(pod, started, alert="GPUUnderutilized", value=None))  # no value: one step
        assert (o.get("from"), o.get("to")) == (4, 3), why(o)
        sim.settle()
        pod = r.pods("llm-inference")[0]
        o = outcome_of(r, _spec(pod, started, alert="GPUMemorySaturated"))
        assert (o.get("from"), o.get("to")) == (3, 4), why(o)
        sim.settle()
        o = outcome_of(r, _spec(pod, started, "resolved", alert="GPUMemorySaturated"))
        assert (o["result"], o.get("from"), o.get("to")) == ("applied", 4, 3), why(o)
        limits = template_of(sim, "llm-inference")["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "3"
        original = json.loads(sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["annotations"][ORIGINAL])
        assert original == {"gpus": {"server": 4}}, "the shrink's original stays on record (GPU-hours held back)"
    finally:
        r.service.kube.close()


def test_a_revert_does_not_overwrite_a_change_made_since(boosting: Reactor, sim: SimCluster,
                                                        tenant: k8s.ApiClient) -> None:
    """Boost 3 → 4, then the team sets 6 itself: the resolve would have written 3 over the team's 6. The value
    is no longer the one the reactor wrote: `changed-since`, and 6 stays."""
    pod = boosting.pods("llm-inference")[0]
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    assert outcome_of(boosting, _spec(pod, started))["to"] == 4
    _apps(tenant).patch_namespaced_deployment("llm-inference", NAMESPACE, {"spec": {"replicas": 6}})
    sim.settle()
    o = outcome_of(boosting, _spec(pod, started, "resolved"))
    assert (o["result"], o["reason"]) == ("skipped", "changed-since"), why(o)
    assert _replicas(sim) == 6


def test_a_resolve_prometheus_could_not_render_a_number_of_still_reverts(boosting: Reactor, sim: SimCluster) -> None:
    """Prometheus prints a template error in place of an annotation it could not expand (its query timed out). A
    resolve carrying one was its own `invalid-alert`, and Alertmanager sends a resolve once: the boost stayed."""
    pod = boosting.pods("llm-inference")[0]
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    assert outcome_of(boosting, _spec(pod, started))["to"] == 4
    sim.settle()
    broken = AlertSpec("GPUSaturated", NAMESPACE, pod, "server", status="resolved", starts_at=started,
                       extra_annotations={"value": "<error expanding template: error calling query: timed out>",
                                          "gpus": "<error expanding template: error calling query: timed out>"})
    o = outcome_of(boosting, broken)
    assert (o["result"], o.get("action"), o.get("from"), o.get("to")) == ("applied", "revert", 4, 3), why(o)
    assert _replicas(sim) == 3


def test_a_removed_or_replaced_previous_key_stops_verifying(sim: SimCluster, token_file: Path, keys: StateKeys,
                                                          tmp_path: Path) -> None:
    """During a rotation the previous key verifies; once its file is removed (or replaced) while the reactor
    runs, records signed by it stop verifying at the next check of the files (the file's stamp changed: no restart;
    the files are stat'ed at most every CHECK_SECONDS), including the verdict cached for the unchanged workload (its
    resourceVersion is the same)."""
    pod = sim.list("pods", NAMESPACE, label_selector="app=llm-inference")[0]["metadata"]["name"]
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    spec = _spec(pod, started, alert="GPUSaturated")
    obj = sim.get("deployments", NAMESPACE, "llm-inference")
    obj["spec"]["template"]["spec"]["priorityClassName"] = "high-priority-gpu"
    sim.apply(obj)
    sim.settle()
    last = {"action": "set-priority", "direction": "up", "container": None, "from": "medium-priority-gpu",
            "to": "high-priority-gpu", "alert": "GPUSaturated", "fingerprint": fingerprint(spec.labels()),
            "startsAt": rfc3339(started), "time": started.strftime("%Y-%m-%dT%H:%M:%SZ")}
    sign_as_reactor(sim, keys, "llm-inference", {LAST_ACTION: json.dumps(last),
                                                  ORIGINAL: json.dumps({"priorityClassName": "medium-priority-gpu"})})
    new_key, previous = tmp_path / "new-key", tmp_path / "previous"
    new_key.write_text("n" * 64)
    shutil.copy(state_key_file(token_file.parent), previous)
    r = deployed_reactor(sim, token_file, revert=["set-priority-up"], revertAfter="0s",
                         alerts={"GPUSaturated": ["set-priority-up"]},
                         state={"keyFile": str(new_key), "previousKeyFile": str(previous),
                                "ledgerName": LEDGER[1]})
    try:
        assert outcome_of(r, spec)["reason"] == "already-applied"  # verified under the previous key, and cached
        previous.unlink()
        files_checked()
        o = outcome_of(r, _spec(pod, started, "resolved"))
        assert (o["result"], o["reason"]) == ("skipped", "unauthenticated-state"), why(o)
        previous.write_text("p" * 64)  # replaced by another key: no better
        files_checked()
        o = outcome_of(r, _spec(pod, started, "resolved"))
        assert (o["result"], o["reason"]) == ("skipped", "unauthenticated-state"), why(o)
        assert template_of(sim, "llm-inference")["priorityClassName"] == "high-priority-gpu"
    finally:
        r.service.kube.close()


@pytest.mark.parametrize("mac", ["v1:é", "v1:" + "é" * 64, "v2:0123456789abcdef:" + "A" * 64, "v1:", "", "v3:00",
                                 "v1:" + "0" * 64 + "\n", "v2:zz:" + "0" * 64, "x" * 10_000])
def test_a_malformed_mac_is_simply_not_authentic(reactor: Reactor, sim: SimCluster, tenant: k8s.ApiClient,
                                                mac: str) -> None:
    """`v1:é` used to raise TypeError in hmac.compare_digest: `internal-error` for the tenant's own alert."""
    pod = reactor.pods("llm-inference")[0]
    _apps(tenant).patch_namespaced_deployment("llm-inference", NAMESPACE,
                                              {"metadata": {"annotations": {STATE_MAC: mac}}})
    o = outcome_of(reactor, _spec(pod, datetime.now(UTC)))
    assert (o["result"], o["reason"]) == ("skipped", "unauthenticated-state"), why(o)


def test_a_malformed_mac_stops_no_verifier_pass(reactor: Reactor, sim: SimCluster, tenant: k8s.ApiClient) -> None:
    """Two changes await verification; the tenant writes `v1:é` on its own. The pass goes on: the other team's
    change is verified, the tenant's record is not authentic (nothing to follow), and no pass fails."""
    started = datetime.now(UTC) - timedelta(minutes=1)
    specs = [_spec(reactor.pods("llm-inference")[0], started),
             AlertSpec("GPUSaturated", NAMESPACE, reactor.pods("trainer")[0], "trainer", 0.99, 2, starts_at=started)]
    answer = reactor.post(notification(specs))
    assert [o["result"] for o in answer.get_json()["outcomes"]] == ["applied", "applied"], answer.get_json()
    _apps(tenant).patch_namespaced_deployment("llm-inference", NAMESPACE,
                                              {"metadata": {"annotations": {STATE_MAC: "v1:é"}}})
    sim.settle()
    verifier = reactor.service.verifier
    assert verifier is not None
    assert verifier.check_all() == 2
    trainer = sim.get("statefulsets", NAMESPACE, "trainer")["metadata"]["annotations"]
    assert json.loads(trainer[VERIFICATION])["result"] == "verified"
    assert verifier.check_all() == 0, "both finished: nothing left on the list"


def test_a_write_answered_5xx_does_not_wedge_the_workload(boosting: Reactor, sim: SimCluster) -> None:
    """The ledger names a write before its patch. A patch answered 500 (not applied) leaves that intent; the
    reactor reads the workload at once, finds it at the version the patch was conditional on, and undoes the
    intent. So when the workload then changes (anyone's edit) and the alert is sent again, its record still counts:
    applied, not `stale-state`."""
    pod = boosting.pods("llm-inference")[0]
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    assert outcome_of(boosting, _spec(pod, started))["to"] == 4
    sim.settle()
    sim.inject_fault(verb="patch", resource="deployments", status=500, count=5)
    later = started + timedelta(minutes=30)
    answer = boosting.post(notification([_spec(pod, later)]))
    sim.clear_faults()
    assert answer.status_code == 503, answer.get_json()
    obj = sim.get("deployments", NAMESPACE, "llm-inference")
    obj["metadata"].setdefault("labels", {})["team"] = "b"  # any change: a new resourceVersion
    sim.apply(obj)
    o = outcome_of(boosting, _spec(pod, later))
    assert (o["result"], o.get("from"), o.get("to")) == ("applied", 4, 5), why(o)
