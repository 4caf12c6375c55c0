"""The verifier reads through the engine's cluster view and honours the mode (issue 21).

Over HTTP against the embedded cluster, the verifier's clock injected and its passes run by hand: the demo's
own Notebook change (`reactor demo` step 11) and a Kueue-managed change are verified; with the mode off
nothing is written during verification, in recommend it is reported once; a revert the API server refuses
makes one Warning (its repeats counted on it, as client-go's event correlator does) and is tried again with
backoff, not every pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.app.assembly import verifier_lease
from reactor.config.settings import build_settings
from reactor.observe.verifier import Verifier
from reactor.state.annotations import MODE, VERIFICATION
from reactor.tools.demo import NOTEBOOKS, Demo, _steps
from reactor.tools.launcher import state_key_file
from reactor.tools.seeds import demo_file
from reactor_sim import SimCluster
from tests.adapters.operators import GPU, container, install
from tests.cluster_builder import deployment
from tests.observe.test_verification import Clock, _cluster, _flushing, _gpus, _grow, _verification
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

VERIFY = {"timeout": "30s", "interval": "1s"}


def _verifier(r: Reactor) -> Verifier:
    assert r.service.verifier is not None
    return r.service.verifier


def _with_lease(r: Reactor, identity: str = "replica-a") -> Reactor:
    _verifier(r).lease = verifier_lease(r.service.engine.settings, r.service.kube, identity)
    _flushing(r)
    return r


def _events(sim: SimCluster, namespace: str, name: str) -> list[dict[str, Any]]:
    return [e for e in sim.list("events", namespace) if e["involvedObject"]["name"] == name
            and (e.get("source") or {}).get("component") == "gpu-reactor"]


def _writes(sim: SimCluster) -> dict[tuple[str, str, str], int]:
    """Every write request the cluster served (Lease renewals aside)."""
    return {k: n for k, n in sim.requests.items()
            if k[0] in ("create", "update", "patch", "delete") and k[1] != "leases" and n}


# --- the demo's Notebook (step 11): an operator's kind, followed through its adapter --------------------------


@pytest.fixture
def demo_cluster() -> Iterator[SimCluster]:
    sim = SimCluster().start()
    sim.load_manifests(demo_file("cluster.yaml").read_text())
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-reactor"}})  # the Lease's
    sim.settle()
    yield sim
    sim.stop()


def _demo_reactor(sim: SimCluster, token_file: Path, clock: Clock, identity: str = "replica-a") -> Reactor:
    """The demo's own policy (reactor/tools/demo_data/policy.yaml), with a key, a token and a short verify.timeout."""
    doc = yaml.safe_load(demo_file("policy.yaml").read_text())
    doc.update(server={"tokenFile": str(token_file)}, state={"keyFile": str(state_key_file(token_file.parent))},
               kube={"timeout": "2s", "qps": 1000, "burst": 1000}, verify=VERIFY, logging={"format": "text"})
    return _with_lease(build_reactor(sim, build_settings(doc, {}), clock=clock), identity)


def _step_11(r: Reactor) -> dict[str, Any]:
    """`reactor demo` step 11, as the demo builds it: it seeds the Notebook and its StatefulSet, then alerts."""
    title, build = _steps()[10].title, _steps()[10].build
    assert "notebook" in title
    body = build(Demo(r.sim, "", ""))
    (outcome,) = r.post(body).get_json()["outcomes"]
    return outcome


def _notebook(sim: SimCluster) -> dict[str, Any]:
    return sim.get("notebooks", NOTEBOOKS, "jupyter")


def _notebook_gpus(sim: SimCluster) -> str:
    return _notebook(sim)["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU]


def _notebook_verification(sim: SimCluster) -> str:
    return str(json.loads(_notebook(sim)["metadata"]["annotations"][VERIFICATION])["result"])


def _notebook_controller(sim: SimCluster) -> None:
    """Kubeflow's notebook controller reconciling: the StatefulSet it owns gets the Notebook's pod template
    (kubeflow/notebook-controller generateStatefulSet copies spec.template.spec), as reactor.tools.demo built it."""
    statefulset = sim.get("statefulsets", NOTEBOOKS, "jupyter")
    statefulset["spec"]["template"]["spec"] = _notebook(sim)["spec"]["template"]["spec"]
    sim.apply(statefulset)
    sim.settle()


def test_the_demos_notebook_change_is_verified_once_the_operator_rolls_it_out(demo_cluster: SimCluster,
                                                                             token_file: Path) -> None:
    """Before: the Lease dropped the kind, the rollout reader knew only Deployment/StatefulSet/CronJob, and the
    change stayed pending with a new RolloutStalled every pass. Now: pending while the notebook controller has
    not carried the change to its StatefulSet, verified once it has and the StatefulSet rolled out."""
    clock = Clock()
    r = _demo_reactor(demo_cluster, token_file, clock)
    outcome = _step_11(r)
    assert (outcome["result"], outcome["workload"], outcome["to"]) == ("applied", f"Notebook/{NOTEBOOKS}/jupyter", 1)
    lease = demo_cluster.get("leases", "gpu-reactor", "gpu-reactor-verifier")
    assert json.loads(lease["metadata"]["annotations"]["gpu-reactor.io/verifying"]) == [
        f"Notebook/{NOTEBOOKS}/jupyter"]
    clock.at(5)
    assert _verifier(r).check_all() == 1
    assert _notebook_verification(demo_cluster) == "pending"  # the StatefulSet still runs the 2-GPU template
    _notebook_controller(demo_cluster)
    clock.at(10)
    _verifier(r).check_all()
    assert _notebook_verification(demo_cluster) == "verified"
    assert _notebook_gpus(demo_cluster) == "1"
    assert [e["reason"] for e in _events(demo_cluster, NOTEBOOKS, "jupyter")] == ["GPUResized"]
    assert r.metric("reactor_verifications_total", result="verified") == 1
    assert _verifier(r).check_all() == 0


def test_a_restarted_reactor_reverts_a_notebook_change_that_never_rolls_out(demo_cluster: SimCluster,
                                                                            token_file: Path) -> None:
    """The change never reaches the StatefulSet: after verify.timeout a replica started after the change (its own
    memory empty) finds the Notebook on the Lease and reverts it through the Notebook, with one RolloutStalled."""
    clock = Clock()
    first = _demo_reactor(demo_cluster, token_file, clock, "before-restart")
    assert _step_11(first)["result"] == "applied"
    after = _demo_reactor(demo_cluster, token_file, clock, "after-restart")
    clock.at(40)  # the first holder never renewed: its Lease expired
    assert _verifier(after).check_all() == 1
    assert (_notebook_gpus(demo_cluster), _notebook_verification(demo_cluster)) == ("2", "reverted")
    for seconds in (41, 42, 43):
        clock.at(seconds)
        _verifier(after).check_all()
    reasons = sorted(e["reason"] for e in _events(demo_cluster, NOTEBOOKS, "jupyter"))
    assert reasons == ["ActionReverted", "GPUResized", "RolloutStalled"]


# --- Kueue: the workload as Kueue sees it ------------------------------------------------------------------


LABELS = {"app": "queued", "kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "wpc-low"}
# Kueue's objects (kueue.x-k8s.io/v1beta1: apis/kueue/v1beta1), in the order they are applied: the two
# WorkloadPriorityClasses of the ladder, a ClusterQueue with room for 32 GPUs, the namespace's LocalQueue.
KUEUE_QUEUES = [
    *({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
       "value": value} for name, value in (("wpc-low", 100), ("wpc-high", 1000))),
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpu-cq"},
     "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
         {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 32}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "team-a", "namespace": NAMESPACE}, "spec": {"clusterQueue": "gpu-cq"}},
]


@pytest.fixture
def queued(token_file: Path) -> Iterator[Reactor]:
    """tests/adapters/test_kueue.py's world: Kueue's CRDs, two WorkloadPriorityClasses, a ClusterQueue with room,
    a LocalQueue, and a 2-replica Deployment submitted to it."""
    sim = _cluster(32, ())
    install(sim, "kueue.x-k8s.io-v1beta2.yaml")  # v1beta2 served: Kueue v0.15+, where the priority label may change
    sim.apply(KUEUE_QUEUES)
    sim.apply(deployment("queued", container("server", 2), replicas=2, priority="medium-priority-gpu", labels=LABELS))
    sim.settle()
    settings = make_settings(token_file, alerts={"GPUSaturated": ["set-priority-up"],
                                                 "GPUMemorySaturated": ["resize-gpu-up"]},
                             priorityLadder=["wpc-low", "wpc-high"], cooldown="0s", verify=VERIFY)
    r = _with_lease(build_reactor(sim, settings, clock=Clock()))
    yield r
    r.service.kube.close()
    sim.stop()


def _queued_verification(sim: SimCluster) -> str:
    raw = sim.get("deployments", NAMESPACE, "queued")["metadata"]["annotations"][VERIFICATION]
    return str(json.loads(raw)["result"])


def test_a_kueue_managed_change_is_verified_as_kueue_sees_the_workload(queued: Reactor) -> None:
    """The priority moves through Kueue's label, and the verified mark is written on the workload read as Kueue
    sees it (its queue, its label's class): the mark keeps the label and the pods' class untouched."""
    from reactor.tools.payloads import AlertSpec, notification

    pods = queued.pods("queued")
    body = notification([AlertSpec("GPUSaturated", NAMESPACE, p, "server", 0.99, 2) for p in pods])
    outcomes = queued.post(body).get_json()["outcomes"]
    assert {(o["result"], o.get("action"), o.get("to")) for o in outcomes} == {("applied", "set-priority", "wpc-high")}
    view = queued.service.engine.decider.view
    workload = view.workload(queued.sim.get("deployments", NAMESPACE, "queued"), "Deployment")
    assert (workload.queue, workload.priority_class, workload.state.verification is not None) == (
        "team-a", "wpc-high", True)
    clock = _verifier(queued).clock
    assert isinstance(clock, Clock)
    clock.at(3)
    assert _verifier(queued).check_all() == 1
    assert _queued_verification(queued.sim) == "verified"
    deployment = queued.sim.get("deployments", NAMESPACE, "queued")
    assert deployment["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-high"
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "medium-priority-gpu"


# --- the mode holds during verification ---------------------------------------------------------------------


@pytest.fixture
def stalled(token_file: Path) -> Iterator[tuple[Reactor, Clock]]:
    """The trainer on a 4-GPU Node grown to 3 GPUs per pod: the new pod fits nowhere, the rollout stalls."""
    sim = _cluster(4)
    clock = Clock()
    settings = make_settings(token_file, alerts={"GPUSaturated": ["resize-gpu-up"]}, cooldown="0s", verify=VERIFY)
    r = _with_lease(build_reactor(sim, settings, clock=clock))
    assert _grow(r)["result"] == "applied"
    sim.settle()
    yield r, clock
    r.service.kube.close()
    sim.stop()


def _set_mode(sim: SimCluster, mode: str) -> None:
    """A person's `kubectl annotate deployment trainer gpu-reactor.io/mode=<mode>`."""
    trainer = sim.get("deployments", NAMESPACE, "trainer")
    trainer["metadata"].setdefault("annotations", {})[MODE] = mode
    sim.apply(trainer)


def test_mode_off_during_verification_writes_nothing(stalled: tuple[Reactor, Clock]) -> None:
    """Before: the verifier reverted 3 → 2 GPUs after the mode was set to off. Now a stalled change of a workload in
    mode off is neither reverted nor marked, and no Event is posted; set to enforce, it is reverted."""
    r, clock = stalled
    _set_mode(r.sim, "off")
    r.sim.reset_counters()
    for seconds in (31, 32, 40, 100):
        clock.at(seconds)
        assert _verifier(r).check_all() == 1
    assert _writes(r.sim) == {}
    assert (_gpus(r.sim), _verification(r.sim)["result"]) == ("3", "pending")
    assert r.metric("reactor_verifications_total", result="reverted") == 0
    _set_mode(r.sim, "enforce")
    clock.at(101)
    _verifier(r).check_all()
    assert (_gpus(r.sim), _verification(r.sim)["result"]) == ("2", "reverted")


def test_mode_recommend_reports_the_revert_once_and_writes_nothing(stalled: tuple[Reactor, Clock]) -> None:
    r, clock = stalled
    _set_mode(r.sim, "recommend")
    r.sim.reset_counters()
    for seconds in (31, 32, 33):
        clock.at(seconds)
        _verifier(r).check_all()
    assert _writes(r.sim) == {}
    assert (_gpus(r.sim), _verification(r.sim)["result"]) == ("3", "pending")
    assert r.metric("reactor_verifications_total", result="revert-recommended") == 1


# --- a revert that cannot be applied -------------------------------------------------------------------------


def test_a_refused_revert_makes_one_event_and_backs_off(stalled: tuple[Reactor, Clock]) -> None:
    """The API server refuses the revert's patch (422): one RolloutStalled Warning, each later try counted on it
    (count, lastTimestamp: client-go's eventLogger.eventObserve), the tries 1, 2, 4 s apart (verify.interval
    doubled), not one per pass; once the patch is accepted the change is reverted."""
    r, clock = stalled
    r.sim.inject_fault(verb="patch", resource="deployments", status=422, count=100)
    r.sim.reset_counters()
    tries = []
    for tenth in range(310, 381, 5):  # a pass every half second, t = 31 s … 38 s
        clock.at(tenth / 10)
        _verifier(r).check_all()
        tries.append(r.sim.requests[("patch", "deployments", "")])
    assert tries[-1] == 4  # at 31, 32, 34 and 38 s: 15 passes, 4 tries
    assert [t for t in tries if t] == sorted(t for t in tries if t)
    warnings = [e for e in _events(r.sim, NAMESPACE, "trainer") if e["reason"] == "RolloutStalled"]
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert (warning["type"], warning["count"]) == ("Warning", 4)
    assert "the revert could not be applied" in warning["message"]
    assert warning["lastTimestamp"] != warning["firstTimestamp"]
    assert r.sim.requests[("create", "events", "")] == 1 and r.sim.requests[("patch", "events", "")] == 3
    assert r.metric("reactor_verifications_total", result="revert-refused") == 1
    assert (_gpus(r.sim), _verification(r.sim)["result"]) == ("3", "pending")
    r.sim.clear_faults()
    clock.at(46)
    _verifier(r).check_all()
    assert (_gpus(r.sim), _verification(r.sim)["result"]) == ("2", "reverted")
    assert r.metric("reactor_verifications_total", result="reverted") == 1
