"""Issue 12, attacks 1 and 2: state a tenant wrote or edited is never acted on, and no write leaves the bounds.

The tenant (RBAC: get/patch Deployments in its namespace) edits the reactor's annotations on a Deployment.
Without the reactor's key it cannot produce a valid `gpu-reactor.io/state-mac`, so every forgery is
skipped `unauthenticated-state` and changes nothing. Independently, state the reactor itself signed
(written when the bounds were wider, or by a compromised replica) is checked against the ladder, the
gpus/replicas bounds and the LimitRange before a revert writes it back; and a time in year 9999 is
`invalid-annotation` (it used to be an OverflowError: a 500 for the whole notification).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL
from reactor.state.seal import STATE_MAC, StateKeys, load_state_keys
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec, fingerprint, notification, rfc3339
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor
from tests.trust.tenant import deployed_reactor, sign_as_reactor, template_of

STARTED = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
REVERT_ALL = {"revert": ["set-priority-up", "scale-replicas-up", "resize-gpu-up"], "revertAfter": "0s"}


def _spec(pod: str, status: str = "firing", alert: str = "GPUSaturated", container: str = "server") -> AlertSpec:
    return AlertSpec(alert, NAMESPACE, pod, container, 0.99, 4, status=status, starts_at=STARTED)


def _fingerprint(spec: AlertSpec) -> str:
    return fingerprint(spec.labels())


def _last_action(spec: AlertSpec, action: str, container: str | None = None, *, time: str | None = None,
                 before: Any = None, after: Any = None) -> str:
    doc = {"action": action, "direction": "up", "container": container, "from": before, "to": after,
           "alert": spec.name, "fingerprint": _fingerprint(spec), "startsAt": rfc3339(STARTED),
           "time": time or (STARTED + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    return json.dumps(doc)


def _tenant_patch(tenant: k8s.ApiClient, name: str, annotations: dict[str, Any]) -> None:
    k8s.AppsV1Api(tenant).patch_namespaced_deployment(name, NAMESPACE, {"metadata": {"annotations": annotations}})


def _signed(sim: SimCluster, keys: StateKeys, name: str, annotations: dict[str, str]) -> None:
    """Write state as the reactor would (signed with its key, its latest write in the ledger): the cluster admin
    sets it, not the tenant."""
    sign_as_reactor(sim, keys, name, annotations)


def _outcome(reactor: Reactor, *specs: AlertSpec) -> list[dict[str, Any]]:
    answer = reactor.post(notification(list(specs)))
    assert answer.status_code == 200, answer.get_json()
    return list(answer.get_json()["outcomes"])


@pytest.fixture
def keys(token_file: Path) -> StateKeys:
    found = load_state_keys(str(state_key_file(token_file.parent)), None)
    assert found is not None
    return found


@pytest.fixture
def reverting(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    """The deployed reactor, reverting every revertible strategy at once when its alert resolves."""
    r = deployed_reactor(sim, token_file, **REVERT_ALL, alerts={"GPUSaturated": ["set-priority-up"]})
    try:
        yield r
    finally:
        r.service.kube.close()


def _forged_original(spec: AlertSpec) -> dict[str, str]:
    return {LAST_ACTION: _last_action(spec, "set-priority"),
            ORIGINAL: json.dumps({"priorityClassName": "system-cluster-critical"})}


def test_a_forged_original_is_never_reverted_to(reverting: Reactor, sim: SimCluster, tenant: k8s.ApiClient) -> None:
    """The attack of the issue: a tenant-written `original` naming system-cluster-critical, then a resolve."""
    pod = reverting.pods("llm-inference")[0]
    _tenant_patch(tenant, "llm-inference", _forged_original(_spec(pod)))
    (o,) = _outcome(reverting, _spec(pod, "resolved"))
    assert (o["result"], o["reason"]) == ("skipped", "unauthenticated-state"), o
    assert template_of(sim, "llm-inference")["priorityClassName"] == "medium-priority-gpu"
    assert reverting.metric("reactor_workload_skips_total", reason="unauthenticated-state") == 1


def test_an_edited_value_under_a_genuine_mac_is_refused(reverting: Reactor, sim: SimCluster,
                                                       tenant: k8s.ApiClient) -> None:
    """The reactor boosts the priority (a genuine, signed record); the tenant edits `original` and keeps the MAC.
    The edited record no longer verifies, and the state ledger holds the reactor's own copy of its latest record:
    the resolve is decided on that copy (state/ledger_codec.py), so the edit neither is written back nor blocks
    the revert (it used to be `unauthenticated-state`, and the boost outlived its resolve)."""
    pod = reverting.pods("llm-inference")[0]
    (o,) = _outcome(reverting, _spec(pod))
    assert (o["result"], o["to"]) == ("applied", "high-priority-gpu"), o
    assert STATE_MAC in sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["annotations"]
    _tenant_patch(tenant, "llm-inference", {ORIGINAL: json.dumps({"priorityClassName": "system-cluster-critical"})})
    (o,) = _outcome(reverting, _spec(pod, "resolved"))
    assert (o["result"], o["reason"]) == ("skipped", "rollout-in-progress"), o
    assert template_of(sim, "llm-inference")["priorityClassName"] == "high-priority-gpu"
    sim.settle()
    (o,) = _outcome(reverting, _spec(pod, "resolved"))
    assert (o["result"], o.get("action"), o.get("to")) == ("applied", "revert", "medium-priority-gpu"), o
    assert template_of(sim, "llm-inference")["priorityClassName"] == "medium-priority-gpu"


def test_the_genuine_record_reverts(reverting: Reactor, sim: SimCluster) -> None:
    """The same flow untouched: boost, resolve, revert — the MAC does not stop the reactor's own state."""
    pod = reverting.pods("llm-inference")[0]
    assert _outcome(reverting, _spec(pod))[0]["result"] == "applied"
    sim.settle()  # the rollout finishes
    (o,) = _outcome(reverting, _spec(pod, "resolved"))
    assert (o["result"], o.get("action"), o.get("to")) == ("applied", "revert", "medium-priority-gpu"), o.get("detail")
    assert template_of(sim, "llm-inference")["priorityClassName"] == "medium-priority-gpu"


def test_state_copied_from_another_workload_is_refused(reverting: Reactor, sim: SimCluster, keys: StateKeys,
                                                      tenant: k8s.ApiClient) -> None:
    """A valid (state, MAC) pair is bound to the uid it was written for: copied elsewhere it does not verify."""
    pod = reverting.pods("llm-inference")[0]
    _signed(sim, keys, "llm-inference", _forged_original(_spec(pod)))
    copied = {k: v for k, v in sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["annotations"].items()
              if k in (LAST_ACTION, ORIGINAL, STATE_MAC)}
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "team-b", "namespace": NAMESPACE,
                            "annotations": {"gpu-reactor.io/mode": "enforce"}},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "team-b"}},
                        "template": {"metadata": {"labels": {"app": "team-b"}},
                                     "spec": {"priorityClassName": "high-priority-gpu", "containers": [
                                         {"name": "server", "image": "registry.example.com/b:1",
                                          "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
    sim.settle()
    _tenant_patch(tenant, "team-b", copied)
    (o,) = _outcome(reverting, _spec(reverting.pods("team-b")[0], "resolved"))
    assert (o["result"], o["reason"]) == ("skipped", "unauthenticated-state"), o


def test_rotation_accepts_the_previous_key_and_signs_with_the_new(sim: SimCluster, token_file: Path,
                                                                  keys: StateKeys, tmp_path: Path) -> None:
    """state.previousKeyFile verifies during a rotation; without it the old state no longer verifies."""
    pod = sim.list("pods", NAMESPACE, label_selector="app=llm-inference")[0]["metadata"]["name"]
    record = {LAST_ACTION: _last_action(_spec(pod), "set-priority", before="medium-priority-gpu",
                                        after="high-priority-gpu"),
              ORIGINAL: json.dumps({"priorityClassName": "medium-priority-gpu"})}
    obj = sim.get("deployments", NAMESPACE, "llm-inference")
    obj["spec"]["template"]["spec"]["priorityClassName"] = "high-priority-gpu"
    sim.apply(obj)
    sim.settle()
    _signed(sim, keys, "llm-inference", record)
    new_key = tmp_path / "new-key"
    new_key.write_text("n" * 64)
    old_key = state_key_file(token_file.parent)
    without = deployed_reactor(sim, token_file, **REVERT_ALL, state={"keyFile": str(new_key)})
    (o,) = _outcome(without, _spec(pod, "resolved"))
    assert o["reason"] == "unauthenticated-state", o
    rotating = deployed_reactor(sim, token_file, **REVERT_ALL,
                                state={"keyFile": str(new_key), "previousKeyFile": str(old_key)})
    (o,) = _outcome(rotating, _spec(pod, "resolved"))
    assert (o["result"], o["action"]) == ("applied", "revert"), o
    written = sim.get("deployments", NAMESPACE, "llm-inference")
    new = load_state_keys(str(new_key), None)
    assert new is not None and new.authentic(written["metadata"]["uid"], written["metadata"]["annotations"])
    assert not keys.authentic(written["metadata"]["uid"], written["metadata"]["annotations"])


@pytest.mark.parametrize(("record", "reason"), [
    ({"priorityClassName": "system-cluster-critical"}, "priority-not-in-ladder"),
    ({"replicas": 40}, "at-max-replicas"),
    ({"gpus": {"server": 12}}, "at-max-gpus"),
], ids=["priority-off-the-ladder", "replicas-past-max", "gpus-past-max-and-limitrange"])
def test_a_signed_original_out_of_bounds_is_not_written(reverting: Reactor, sim: SimCluster, keys: StateKeys,
                                                       record: dict[str, Any], reason: str) -> None:
    """Bounds hold whatever reached the write: even a validly signed `original` outside them is refused."""
    pod = reverting.pods("llm-inference")[0]
    action, container, now = {"priorityClassName": ("set-priority", None, "medium-priority-gpu"),
                              "replicas": ("scale-replicas", None, 3),
                              "gpus": ("resize-gpu", "server", 4)}[next(iter(record))]
    before = next(iter(record.values()))
    before = before["server"] if isinstance(before, dict) else before  # the value a revert of it writes back
    _signed(sim, keys, "llm-inference", {LAST_ACTION: _last_action(_spec(pod), action, container, before=before,
                                                                   after=now),
                                         ORIGINAL: json.dumps(record)})
    before = sim.get("deployments", NAMESPACE, "llm-inference")
    (o,) = _outcome(reverting, _spec(pod, "resolved"))
    assert (o["result"], o["reason"]) == ("skipped", reason), o
    after = sim.get("deployments", NAMESPACE, "llm-inference")
    assert after["metadata"]["generation"] == before["metadata"]["generation"]


def test_a_time_in_year_9999_is_invalid_not_a_500(reactor: Reactor, sim: SimCluster, keys: StateKeys) -> None:
    """A signed `last-action` in year 9999 (formerly an OverflowError in the hysteresis arithmetic, answered
    500 for the whole notification): `invalid-annotation` for that workload, the others still decided."""
    pod = reactor.pods("llm-inference")[0]
    _signed(sim, keys, "llm-inference", {LAST_ACTION: _last_action(_spec(pod), "scale-replicas",
                                                                   time="9999-12-31T23:59:59Z"),
                                         COOLDOWN_UNTIL: "2000-01-01T00:00:00Z"})
    trainer = reactor.pods("trainer")[0]
    outcomes = _outcome(reactor, _spec(pod, alert="GPUIdle"), _spec(trainer, container="trainer"))
    by_pod = {o["pod"]: o for o in outcomes}
    assert (by_pod[pod]["result"], by_pod[pod]["reason"]) == ("skipped", "invalid-annotation"), by_pod[pod]
    assert by_pod[trainer]["result"] == "applied", by_pod[trainer]


def test_a_tenant_written_time_in_year_9999_is_unauthenticated(reactor: Reactor, tenant: k8s.ApiClient) -> None:
    pod = reactor.pods("llm-inference")[0]
    _tenant_patch(tenant, "llm-inference", {LAST_ACTION: _last_action(_spec(pod), "scale-replicas",
                                                                      time="9999-12-31T23:59:59Z")})
    (o,) = _outcome(reactor, _spec(pod, alert="GPUIdle"))
    assert (o["result"], o["reason"]) == ("skipped", "unauthenticated-state"), o


def test_an_unexpected_error_fails_one_workload_not_the_notification(reactor: Reactor, sim: SimCluster,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A bug met while deciding one workload: that workload's alerts fail (logged with the traceback), the
    other workload of the same notification is decided and written, and the answer is 200."""
    import reactor.engine.decider as engine_module

    real = engine_module.decide

    def broken(signal: Any, workload: Any, *args: Any, **kw: Any) -> Any:
        if workload.ref.name == "llm-inference":
            raise ZeroDivisionError("a bug nobody foresaw")
        return real(signal, workload, *args, **kw)

    monkeypatch.setattr(engine_module, "decide", broken)
    pod, trainer = reactor.pods("llm-inference")[0], reactor.pods("trainer")[0]
    outcomes = {o["pod"]: o for o in _outcome(reactor, _spec(pod), _spec(trainer, container="trainer"))}
    assert (outcomes[pod]["result"], outcomes[pod]["reason"]) == ("failed", "internal-error"), outcomes[pod]
    assert outcomes[trainer]["result"] == "applied"
    assert "ZeroDivisionError" in caplog.text and "Traceback" in caplog.text
    assert reactor.metric("reactor_workload_skips_total", reason="internal-error") == 1
