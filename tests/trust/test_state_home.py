"""Issue 35, promise 2: another team cannot switch the reactor off for an InferenceService through its state Lease.

KServe copies an InferenceService's annotations into its pods, so the reactor keeps its record of one on the Lease
`<isvc>.gpu-reactor` beside it (reactor/state/lease_home.py). In a namespace shared by teams, a team holding only
Lease rights (RBAC, through the official client: this test's `team-c`) could create that Lease first, with an
ownerReference carrying the victim's uid and any unsigned record: every later alert on the victim was
`unauthenticated-state`, for good. Now only a record the reactor sealed for the resource's uid counts: a Lease holding
anything else is read as no record (reactor/state/seal.py `authenticate`), the state ledger's copy of the reactor's
latest record stands in for it where there is one, and the reactor's next write replaces the Lease's contents and
its ownerReferences. One test per way in: the Lease pre-created, the Lease edited, the Lease deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, MODE
from reactor.state.ledger_codec import LEDGER_KEY, decode
from reactor.state.seal import STATE_MAC, parse_mac
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.adapters.operators import GPU, custom, install, reconcile_isvc
from tests.support import NAMESPACE, Reactor
from tests.trust.tenant import LEDGER, MinuteClock, deployed, why

HOME = "llama.gpu-reactor"
TEAM_C, TEAM_C_TOKEN = "team-c@example.com", "team-c-token"
_RBAC = "rbac.authorization.k8s.io"
LEASES_ONLY = [
    {"apiVersion": f"{_RBAC}/v1", "kind": "Role", "metadata": {"name": "team-c-leases", "namespace": NAMESPACE},
     "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                "verbs": ["get", "list", "create", "update", "patch", "delete"]}]},
    {"apiVersion": f"{_RBAC}/v1", "kind": "RoleBinding", "metadata": {"name": "team-c-leases", "namespace": NAMESPACE},
     "subjects": [{"kind": "User", "apiGroup": _RBAC, "name": TEAM_C}],
     "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": "team-c-leases"}},
]
POLICY = {"cooldown": "0s", "reverseAfter": "0s", "revertAfter": "0s", "revert": ["resize-gpu-up"],
          "alerts": {"GPUMemorySaturated": ["resize-gpu-up"], "GPUUnderutilized": ["resize-gpu-down"]}}
JUNK = {LAST_ACTION: "{}", COOLDOWN_UNTIL: "2199-01-01T00:00:00Z", STATE_MAC: "v2:0123456789abcdef:" + "0" * 64}


@pytest.fixture
def isvc(sim: SimCluster) -> dict[str, Any]:
    """Team A's InferenceService (raw mode, 4 GPUs, the reactor enforcing), and team C holding Lease rights only."""
    install(sim, "serving.kserve.io_inferenceservices.yaml")
    gpus = {"limits": {GPU: "4"}, "requests": {GPU: "4"}}
    sim.apply([*LEASES_ONLY, {
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llama", "namespace": NAMESPACE, "annotations": {MODE: "enforce"}},
        "spec": {"predictor": {"minReplicas": 1, "maxReplicas": 2, "priorityClassName": "medium-priority-gpu",
                               "model": {"modelFormat": {"name": "huggingface"},
                                         "storageUri": "hf://meta-llama/Llama-3.1-8B", "resources": gpus}}}}])
    reconcile_isvc(sim, "llama")
    sim.add_token(TEAM_C_TOKEN, user=TEAM_C)
    return custom(sim, "inferenceservices", "llama")


@pytest.fixture
def team_c(sim: SimCluster) -> Iterator[k8s.CoordinationV1Api]:
    config = k8s.Configuration(host=sim.url)
    config.api_key, config.api_key_prefix = {"BearerToken": TEAM_C_TOKEN}, {"BearerToken": "Bearer"}
    with k8s.ApiClient(config) as api:
        yield k8s.CoordinationV1Api(api)


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    with deployed(sim, token_file, clock=MinuteClock(), **POLICY) as r:
        yield r


def _pods(sim: SimCluster) -> list[str]:
    pods = sim.list("pods", NAMESPACE, label_selector="serving.kserve.io/inferenceservice=llama")
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


def _post(reactor: Reactor, pods: list[str], status: str = "firing") -> dict[str, Any]:
    specs = [AlertSpec("GPUMemorySaturated", NAMESPACE, pod, "kserve-container", 0.97, 4, status=status,
                       starts_at=datetime.now(UTC).replace(microsecond=0, second=0) - timedelta(hours=1))
             for pod in pods]
    answer = reactor.post(notification(specs))
    assert answer.status_code == 200, answer.get_json()
    (outcome, *others) = answer.get_json()["outcomes"]
    assert all(o["result"] == outcome["result"] for o in others), answer.get_json()
    return dict(outcome)


def _gpus(sim: SimCluster) -> str:
    return str(custom(sim, "inferenceservices", "llama")["spec"]["predictor"]["model"]["resources"]["limits"][GPU])


def _reactors_own(sim: SimCluster, isvc: dict[str, Any]) -> dict[str, Any]:
    """The state Lease, asserted to carry the record the ledger names as the reactor's latest, owned by team A's
    InferenceService alone."""
    home = sim.get("leases", NAMESPACE, HOME)
    assert [r["uid"] for r in home["metadata"]["ownerReferences"]] == [isvc["metadata"]["uid"]]
    parsed = parse_mac(home["metadata"]["annotations"].get(STATE_MAC))
    entries = decode(sim.get("leases", *LEDGER)["metadata"]["annotations"][LEDGER_KEY])
    assert parsed is not None and entries[isvc["metadata"]["uid"]].write == parsed[1]
    return dict(home["metadata"]["annotations"])


def _raise(reactor: Reactor, sim: SimCluster) -> list[str]:
    """4 → 5 GPUs, KServe rolls the predictor; the pods that fired (for the resolve)."""
    firing = _pods(sim)
    o = _post(reactor, firing)
    assert (o["result"], o.get("from"), o.get("to")) == ("applied", 4, 5), why(o)
    reconcile_isvc(sim, "llama")
    return firing


def test_a_lease_precreated_by_another_team_is_no_record(reactor: Reactor, sim: SimCluster, isvc: dict[str, Any],
                                                         team_c: k8s.CoordinationV1Api) -> None:
    """Team C creates `llama.gpu-reactor` first, owned by team A's uid, with an unsigned record naming a cooldown to
    2199. It used to make every alert `unauthenticated-state`; now it is read as no record, the alert is acted on,
    and the reactor's write takes the Lease over."""
    team_c.create_namespaced_lease(NAMESPACE, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {},
        "metadata": {"name": HOME, "annotations": JUNK,
                     "ownerReferences": [{"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                                          "name": "llama", "uid": isvc["metadata"]["uid"]}]}})
    _raise(reactor, sim)
    assert _gpus(sim) == "5"
    assert _reactors_own(sim, isvc)[COOLDOWN_UNTIL] != JUNK[COOLDOWN_UNTIL]
    assert not reactor.metric("reactor_workload_skips_total", reason="unauthenticated-state")


def test_a_lease_edited_by_another_team_does_not_block_the_revert(reactor: Reactor, sim: SimCluster,
                                                                  isvc: dict[str, Any],
                                                                  team_c: k8s.CoordinationV1Api) -> None:
    """The reactor raised 4 → 5 (its record on the Lease); team C overwrites the record with its own. The resolve is
    decided on the ledger's copy: reverted 5 → 4, and the Lease carries the reactor's record again."""
    firing = _raise(reactor, sim)
    team_c.patch_namespaced_lease(HOME, NAMESPACE, {"metadata": {"annotations": JUNK}})
    o = _post(reactor, firing, "resolved")
    assert (o["result"], o.get("action"), o.get("from"), o.get("to")) == ("applied", "revert", 5, 4), why(o)
    assert _gpus(sim) == "4"
    assert "revert" in _reactors_own(sim, isvc)[LAST_ACTION]


def test_a_lease_deleted_by_another_team_does_not_block_the_revert(reactor: Reactor, sim: SimCluster,
                                                                   isvc: dict[str, Any],
                                                                   team_c: k8s.CoordinationV1Api) -> None:
    """The reactor raised 4 → 5; team C deletes the state Lease. The resolve reverts from the ledger's copy, and the
    reactor's write creates the Lease again with its record."""
    firing = _raise(reactor, sim)
    team_c.delete_namespaced_lease(HOME, NAMESPACE)
    o = _post(reactor, firing, "resolved")
    assert (o["result"], o.get("action"), o.get("from"), o.get("to")) == ("applied", "revert", 5, 4), why(o)
    assert _gpus(sim) == "4"
    assert "revert" in _reactors_own(sim, isvc)[LAST_ACTION]


def test_the_verified_mark_takes_over_a_lease_another_team_rewrote(reactor: Reactor, sim: SimCluster,
                                                                    isvc: dict[str, Any],
                                                                    team_c: k8s.CoordinationV1Api) -> None:
    """After the raise, team C rewrites the Lease: its own record, owned by another uid. The verifier still follows
    the change (the ledger's copy says a verification is pending), and its mark — the record alone, conditional on
    the Lease as read, whoever made it — replaces the Lease's contents and owner instead of failing every pass."""
    _raise(reactor, sim)
    team_c.patch_namespaced_lease(HOME, NAMESPACE, {"metadata": {"annotations": JUNK, "ownerReferences": [
        {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "name": "llama",
         "uid": "00000000-0000-0000-0000-000000000000"}]}}, _content_type="application/merge-patch+json")
    assert [r["uid"] for r in sim.get("leases", NAMESPACE, HOME)["metadata"]["ownerReferences"]] == [
        "00000000-0000-0000-0000-000000000000"]
    verifier = reactor.service.verifier
    assert verifier is not None
    verifier.check_all()
    record = _reactors_own(sim, isvc)
    assert '"result":"verified"' in record["gpu-reactor.io/verification"], record
    assert _gpus(sim) == "5"


def test_an_older_record_put_back_on_the_lease_does_not_block_the_revert(reactor: Reactor, sim: SimCluster,
                                                                        isvc: dict[str, Any],
                                                                        team_c: k8s.CoordinationV1Api) -> None:
    """Team C keeps the Lease's record of a first raise (genuine: the reactor sealed it) and puts it back over a
    later raise's. The resolve reverts the later raise from the ledger's copy (it used to be `stale-state`)."""
    firing = _raise(reactor, sim)
    saved = dict(team_c.read_namespaced_lease(HOME, NAMESPACE).metadata.annotations)
    o = _post(reactor, firing, "resolved")
    assert (o["result"], o.get("action")) == ("applied", "revert"), why(o)
    reconcile_isvc(sim, "llama")
    firing = _raise(reactor, sim)
    team_c.patch_namespaced_lease(HOME, NAMESPACE, {"metadata": {"annotations": saved}})
    o = _post(reactor, firing, "resolved")
    assert (o["result"], o.get("action"), o.get("from"), o.get("to")) == ("applied", "revert", 5, 4), why(o)
    assert _gpus(sim) == "4"
    assert "revert" in _reactors_own(sim, isvc)[LAST_ACTION]
    assert not reactor.metric("reactor_workload_skips_total", reason="stale-state")
