"""Rebalancing over real HTTP against the embedded cluster (issue 29): the seed's picture in one 8-GPU quota, a
training Deployment opted in as donor and an inference Deployment that saturates. The alert source is an
in-process implementation of `core.firing.FiringAlerts` holding the alerts Alertmanager would show firing."""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Collection, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor.core.errors import AlertSourceUnavailable
from reactor.core.model import Alert
from reactor.engine import utcnow
from reactor.intake.alerts import parse_notification
from reactor.state.annotations import LAST_ACTION
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.support import NAMESPACE, TOKEN, Reactor, build_reactor, make_settings

GPU = "nvidia.com/gpu"
ROOT = Path(__file__).resolve().parents[2]
REBALANCE = "gpu-reactor.io/rebalance"


class Source:
    """The alerts firing now, as Alertmanager's API would answer; `down` makes it raise as an unreachable one."""

    def __init__(self, alerts: Sequence[Alert] = (), down: str = "") -> None:
        self.alerts, self.down, self.asked = list(alerts), down, 0
        self.rules: PrometheusStandIn | None = None  # genuine idle alerts: Prometheus's rules fire them too

    def firing(self, namespace: str, alertnames: Collection[str]) -> Sequence[Alert]:
        self.asked += 1
        if self.down:
            raise AlertSourceUnavailable(self.down)
        found = [a for a in self.alerts if a.namespace == namespace and a.name in alertnames and a.firing]
        for a in found if self.rules is not None else ():
            self.rules.hold(a.labels, a.annotations, math.nan if a.value is None else a.value)  # type: ignore[union-attr]
        return found


def _deployment(name: str, replicas: int, gpus: int, priority: str, *, donor: bool = False) -> dict[str, Any]:
    annotations = {"gpu-reactor.io/donor": "true"} if donor else {}
    return build.deployment(name, build.container(image=f"{name}:1", gpus=gpus), replicas=replicas,
                            priority=priority, annotations=annotations)


QUOTA = build.quota("gpu-quota", {f"requests.{GPU}": 8})


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    """The seed's PriorityClasses, two 8-GPU Nodes and one 8-GPU quota."""
    with build.start(build.namespace(), build.gpu_node(), build.gpu_node("gpu-node-2"), QUOTA, priority_classes=True,
                     settle=False) as sim:
        yield sim


def _reactor(sim: SimCluster, token_file: Path, source: Source | None, **policy: Any) -> Reactor:
    doc = {"rebalance": {"enabled": True, "alertmanagerUrl": "http://127.0.0.1:9"}, **policy}
    r = build_reactor(sim, make_settings(token_file, **doc))
    assert r.service.engine.rebalancing is not None
    r.service.engine.rebalancing.source = source
    if source is not None:
        source.rules = r.prometheus
    return r


def _idle(sim: SimCluster, app: str, value: float = 0.05, name: str = "GPUIdle") -> list[Alert]:
    """The idle alerts Alertmanager holds for each pod of `app`, read as the webhook reads them."""
    pods = sorted(p["metadata"]["name"] for p in sim.list("pods", NAMESPACE, label_selector=f"app={app}"))
    return list(parse_notification(notification([AlertSpec(name, NAMESPACE, p, "main", value) for p in pods])).alerts)


def _used(sim: SimCluster) -> int:
    return int(sim.get("resourcequotas", NAMESPACE, "gpu-quota")["status"]["used"][f"requests.{GPU}"])


def _replicas(sim: SimCluster, name: str) -> int:
    return int(sim.get("deployments", NAMESPACE, name)["spec"]["replicas"])


def _events(sim: SimCluster, reason: str) -> list[dict[str, Any]]:
    return [e for e in sim.list("events", NAMESPACE) if e["reason"] == reason]


def _rolled_out(sim: SimCluster, name: str) -> bool:
    d = sim.get("deployments", NAMESPACE, name)
    status = d.get("status") or {}
    return status.get("updatedReplicas") == status.get("readyReplicas") == d["spec"]["replicas"]


def _outcome(r: Reactor, app: str, **kw: Any) -> dict[str, Any]:
    (outcome,) = {o["workload"]: o for o in r.post(r.alerts("GPUSaturated", app, "main", value=0.97, **kw))
                  .get_json()["outcomes"]}.values()
    return outcome


def _full(cluster: SimCluster) -> None:
    """training 2 × 2 GPUs (medium, opted in) + inference 2 × 2 GPUs (high): the quota's 8 GPUs all used."""
    cluster.apply([_deployment("training", 2, 2, "medium-priority-gpu", donor=True),
                   _deployment("inference", 2, 2, "high-priority-gpu")])
    cluster.settle()
    assert _used(cluster) == 8


def test_an_idle_donor_gives_first_then_the_receiver_grows_within_the_quota(cluster: SimCluster,
                                                                               token_file: Path) -> None:
    _full(cluster)
    source = Source(_idle(cluster, "training"))
    r = _reactor(cluster, token_file, source)
    outcome = _outcome(r, "inference")
    # The donor's change is written, the receiver's waits for the API server's quota usage.
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
    assert "rebalance: Deployment/training gave 2 GPUs of quota gpu-quota (scale-replicas-down 2→1)" \
        in outcome["detail"]
    assert source.asked == 1
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference")) == (1, 2)
    assert _used(cluster) == 8
    cluster.settle()  # the ReplicaSet controller deletes a training pod; the quota controller recounts
    assert _used(cluster) == 6
    assert r.service.rebalancer.tick(utcnow()) == 0
    assert _replicas(cluster, "inference") == 3
    cluster.settle()
    assert _used(cluster) == 8
    assert _rolled_out(cluster, "training") and _rolled_out(cluster, "inference")
    assert not _events(cluster, "FailedCreate")
    r.flush_events()
    assert len(_events(cluster, "RebalanceDonated")) == 1
    assert "to Deployment/inference" in _events(cluster, "RebalanceDonated")[0]["message"]
    assert "given by Deployment/training" in _events(cluster, "RebalanceReceived")[0]["message"]
    assert _events(cluster, "RebalancePending")
    donor = cluster.get("deployments", NAMESPACE, "training")["metadata"]["annotations"][REBALANCE]
    receiver = cluster.get("deployments", NAMESPACE, "inference")["metadata"]["annotations"][REBALANCE]
    assert '"role":"donor"' in donor and '"name":"inference"' in donor and '"gpus":2' in donor
    assert '"role":"receiver"' in receiver and '"name":"training"' in receiver
    training_uid = cluster.get("deployments", NAMESPACE, "training")["metadata"]["uid"]
    assert f'"uid":"{training_uid}"' in receiver  # the donor as read when it gave, not read again per attempt
    grown = json.loads(cluster.get("deployments", NAMESPACE, "inference")["metadata"]["annotations"][LAST_ACTION])
    assert json.loads(receiver)["paid"] == [grown["fingerprint"], grown["startsAt"]]  # the paid growth, named
    assert r.metric("reactor_rebalances_total", result="moved") == 1
    assert r.metric("reactor_rebalances_total", result="pending") == 1
    assert r.metric("reactor_rebalance_gpus_moved_total") == 2
    # The state each side carries verifies: the donor's own alert later meets its cooldown, not a refusal.
    again = r.post(r.alerts("GPUIdle", "training", "main", value=0.05)).get_json()["outcomes"][0]
    assert again["reason"] in ("already-applied", "cooldown")


def test_the_receiver_grows_at_once_when_the_quota_already_shows_the_room(cluster: SimCluster,
                                                                          token_file: Path) -> None:
    """The cluster's controllers may delete the donor's pod before the receiver is decided again (here they run
    just then): the growth is applied in the same notification, on the quota's status read again."""
    _full(cluster)
    r = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    readers = r.service.engine.readers
    fresh = readers.new

    def controllers_ran_meanwhile() -> Any:
        cluster.settle()  # the ReplicaSet controller deleted the training pod, the quota controller recounted
        return fresh()

    readers.new = controllers_ran_meanwhile  # type: ignore[method-assign]
    outcome = _outcome(r, "inference")
    assert (outcome["result"], outcome["action"], outcome["from"], outcome["to"]) == (
        "applied", "scale-replicas", 2, 3)
    # The answer says a donor paid for it, not only the Events.
    assert outcome["detail"] == "rebalance: Deployment/training gave 2 GPUs of quota gpu-quota", outcome
    assert r.service.rebalancer is not None and r.service.rebalancer.waiting() == []
    cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference")) == (1, 3)
    assert _used(cluster) == 8 and not _events(cluster, "FailedCreate")
    assert r.metric("reactor_rebalances_total", result="moved") == 1
    assert r.metric("reactor_rebalances_total", result="pending") == 0


def test_no_idle_donor_is_quota_exceeded_naming_why(cluster: SimCluster, token_file: Path) -> None:
    """No alert idle, then an idle workload that did not opt in: quota-exceeded as today, saying why each failed."""
    cluster.apply([_deployment("training", 2, 2, "medium-priority-gpu"),
                   _deployment("inference", 2, 2, "high-priority-gpu")])
    cluster.settle()
    source = Source()
    r = _reactor(cluster, token_file, source)
    outcome = _outcome(r, "inference")
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
    assert "no donor: the alert source shows no workload idle in the namespace" in outcome["detail"]
    source.alerts = _idle(cluster, "training")
    outcome = _outcome(r, "inference")
    assert "no donor: Deployment/training: not opted in (annotation gpu-reactor.io/donor: \"true\")" \
        in outcome["detail"]
    assert _replicas(cluster, "training") == 2
    assert not any(verb in ("patch", "update") for verb, *_ in cluster.requests)
    assert r.metric("reactor_rebalances_total", result="no-donor") == 2


def test_a_donor_of_higher_priority_or_below_its_minimum_does_not_give(cluster: SimCluster, token_file: Path) -> None:
    """The inference workload idles, the training one saturates: inference ranks higher, so it does not give; and
    a donor at its minimum replicas has no shrink of its own to give."""
    cluster.apply([_deployment("training", 2, 2, "medium-priority-gpu"),
                   _deployment("inference", 2, 2, "high-priority-gpu", donor=True)])
    cluster.settle()
    r = _reactor(cluster, token_file, Source(_idle(cluster, "inference")))
    outcome = _outcome(r, "training")
    assert ("Deployment/inference: priority high-priority-gpu is higher than the receiver's medium-priority-gpu"
            in outcome["detail"])
    r2 = _reactor(cluster, token_file, Source(_idle(cluster, "inference")), rebalance={
        "enabled": True, "alertmanagerUrl": "http://127.0.0.1:9", "higherPriorityDonors": True},
        replicas={"min": 2})
    outcome = _outcome(r2, "training")
    assert "Deployment/inference: its own decision on GPUIdle: at-min-replicas" in outcome["detail"]
    assert _replicas(cluster, "inference") == 2


def test_a_donor_the_source_does_not_show_idle_is_untouched(cluster: SimCluster, token_file: Path) -> None:
    """training is opted in but its alert is not firing in the source (only another workload's is): untouched."""
    _full(cluster)
    before = cluster.get("deployments", NAMESPACE, "training")["metadata"]["resourceVersion"]
    other = [a for a in _idle(cluster, "inference") if a.pod]  # the receiver's own pods: never its own donor
    r = _reactor(cluster, token_file, Source(other))
    outcome = _outcome(r, "inference")
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
    assert "no donor: Deployment/inference: is the receiver" in outcome["detail"]
    # A source that answers more than it was asked (training saturated, not idle) is not believed either.
    rebalancing = r.service.engine.rebalancing
    assert rebalancing is not None
    source = Source(_idle(cluster, "training", value=0.97, name="GPUSaturated"))
    source.firing = lambda ns, names: source.alerts  # type: ignore[method-assign]
    rebalancing.source = source
    outcome = _outcome(r, "inference")
    assert "no donor: the alert source shows no workload idle in the namespace" in outcome["detail"]
    assert cluster.get("deployments", NAMESPACE, "training")["metadata"]["resourceVersion"] == before


def test_an_unreachable_source_means_no_rebalance_and_nothing_written(cluster: SimCluster, token_file: Path) -> None:
    _full(cluster)
    r = _reactor(cluster, token_file, Source(down="connection refused by alertmanager:9093"))
    outcome = _outcome(r, "inference")
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
    assert ("no rebalance: the alert source is unavailable: connection refused by alertmanager:9093"
            in outcome["detail"])
    assert not any(verb in ("patch", "update") for verb, *_ in cluster.requests)
    assert r.metric("reactor_rebalances_total", result="source-unavailable") == 1
    none = _reactor(cluster, token_file, None)
    assert "no rebalance: no alert source" in _outcome(none, "inference")["detail"]


def test_the_receiver_that_cannot_grow_in_time_gives_the_donor_back(cluster: SimCluster, token_file: Path) -> None:
    """The donor gave, then the receiver may no longer grow (its owners set mode off): it waits until
    verify.timeout after the donor's write, and the donor gets back what it gave, through the act step."""
    _full(cluster)
    r = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    _outcome(r, "inference")
    assert _replicas(cluster, "training") == 1
    cluster.settle()
    inference = cluster.get("deployments", NAMESPACE, "inference")
    inference["metadata"]["annotations"]["gpu-reactor.io/mode"] = "off"
    cluster.apply(inference)
    assert r.service.rebalancer.tick(utcnow()) == 1  # refused (mode off), before the deadline: it waits
    assert _replicas(cluster, "training") == 1
    assert r.service.rebalancer.tick(utcnow() + timedelta(minutes=11)) == 0
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference")) == (2, 2)
    cluster.settle()
    assert _used(cluster) == 8 and not _events(cluster, "FailedCreate")
    r.flush_events()
    (given,) = _events(cluster, "RebalanceGivenBack")
    assert "Deployment/inference could not grow within 10m (mode-off: " in given["message"]
    # It names what moved, and no measurement or pod it never had.
    assert given["message"].startswith(
        "gpu-reactor revert (scale-replicas-down): 1 -> 2 on RebalanceGiveBack (resolved); "), given["message"]
    assert "None" not in given["message"] and "for pods" not in given["message"]
    assert REBALANCE not in cluster.get("deployments", NAMESPACE, "training")["metadata"]["annotations"]
    assert r.metric("reactor_rebalances_total", result="given-back") == 1


def test_the_receiver_resolving_restores_the_donor(cluster: SimCluster, token_file: Path) -> None:
    _full(cluster)
    r = _reactor(cluster, token_file, Source(_idle(cluster, "training")),
                 revert=["set-priority-up", "scale-replicas-up"], revertAfter="0s")
    _outcome(r, "inference")
    cluster.settle()
    assert r.service.rebalancer.tick(utcnow()) == 0
    cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference"), _used(cluster)) == (1, 3, 8)
    # Meanwhile nothing else changes on the receiver: another alert of its own would become its last change, and
    # the resolve below would find nothing of its own to undo, the donor owed for good.
    other = r.post(r.alerts("GPUIdle", "inference", "main", value=0.0)).get_json()["outcomes"][0]
    assert other["reason"] == "rebalance-held", other["detail"]
    # The receiver's saturation resolves: its own revert (scale-replicas-up is reverted by this policy), then the
    # donor's restore once the quota shows the room.
    body = r.alerts("GPUSaturated", "inference", "main", value=0.3, status="resolved")
    outcome = r.post(body).get_json()["outcomes"][0]
    assert (outcome["result"], outcome["action"]) == ("applied", "revert")
    assert _replicas(cluster, "inference") == 2 and _replicas(cluster, "training") == 1
    cluster.settle()
    assert _used(cluster) == 4 + 2
    assert r.service.rebalancer.tick(utcnow()) == 0
    cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference"), _used(cluster)) == (2, 2, 8)
    assert not _events(cluster, "FailedCreate")
    r.flush_events()
    (restored,) = _events(cluster, "RebalanceRestored")
    assert "saturation resolved" in restored["message"]
    assert "None" not in restored["message"] and "for pods" not in restored["message"], restored["message"]
    assert r.metric("reactor_rebalances_total", result="restored") == 1


def test_two_receivers_racing_for_one_donor_one_wins(cluster: SimCluster, token_file: Path) -> None:
    """Two inference Deployments (1 × 2 GPUs each) saturate at once; one training donor can free 2 GPUs once."""
    cluster.apply([_deployment("training", 2, 2, "medium-priority-gpu", donor=True),
                   _deployment("inference-a", 1, 2, "high-priority-gpu"),
                   _deployment("inference-b", 1, 2, "high-priority-gpu")])
    cluster.settle()
    assert _used(cluster) == 8
    r = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    answers: dict[str, dict[str, Any]] = {}
    start = threading.Barrier(2)

    def post(app: str) -> None:
        client = r.service.app.test_client()
        start.wait()
        body = r.alerts("GPUSaturated", app, "main", value=0.97)
        answers[app] = client.post("/alerts", json=body, headers={"Authorization": f"Bearer {TOKEN}"}).get_json()

    threads = [threading.Thread(target=post, args=(app,)) for app in ("inference-a", "inference-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    details = [answers[app]["outcomes"][0]["detail"] for app in ("inference-a", "inference-b")]
    won = [d for d in details if "rebalance: Deployment/training gave 2 GPUs" in d]
    assert len(won) == 1, details
    assert _replicas(cluster, "training") == 1
    (lost,) = [d for d in details if d not in won]
    assert "no donor" in lost
    # Usually both decided on the same donor version: the loser's conditional write met a 409, and on the re-read
    # the donor's sealed record (its firing already handled, its cooldown) refused it: lost-race.
    assert r.metric("reactor_rebalances_total", result="lost-race") + r.metric(
        "reactor_rebalances_total", result="no-donor") == 1
    assert r.metric("reactor_rebalances_total", result="pending") == 1
    cluster.settle()
    assert r.service.rebalancer.tick(utcnow()) == 0
    cluster.settle()
    assert sorted([_replicas(cluster, "inference-a"), _replicas(cluster, "inference-b")]) == [1, 2]
    assert _used(cluster) == 8 and not _events(cluster, "FailedCreate")


def test_a_receiver_resolving_before_it_grew_gives_the_donor_back_and_never_grows(cluster: SimCluster,
                                                                                 token_file: Path) -> None:
    _full(cluster)
    r = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    _outcome(r, "inference")
    cluster.settle()
    assert (_replicas(cluster, "training"), _used(cluster)) == (1, 6)
    resolved = r.post(r.alerts("GPUSaturated", "inference", "main", value=0.3, status="resolved")).get_json()
    assert resolved["outcomes"][0]["result"] == "skipped"  # nothing of its own to revert
    assert _replicas(cluster, "training") == 2  # the donor got back what it gave, at once (the room was there)
    assert r.service.rebalancer.tick(utcnow() + timedelta(minutes=11)) == 0
    cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference"), _used(cluster)) == (2, 2, 8)
    assert r.metric("reactor_rebalances_total", result="restored") == 1


def _cache_sees_no_record(r: Reactor, name: str) -> None:
    """Wait (bounded) until the reactor's watch cache holds `name` without its `rebalance` record."""
    assert r.service.informers is not None
    deadline = utcnow() + timedelta(seconds=10)
    while utcnow() < deadline:
        cached = r.service.informers.store.lookup("Deployment", NAMESPACE, name)
        if isinstance(cached, dict) and REBALANCE not in (cached["metadata"].get("annotations") or {}):
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"the watch cache still holds {name}'s rebalance record")


@contextlib.contextmanager
def _restarted(cluster: SimCluster, token_file: Path, *, watch_cache: bool = True) -> Iterator[Reactor]:
    """A new reactor process on the same cluster: an empty waiting list, the watch cache listed and synced (or
    none: every read goes to the API server)."""
    r = _reactor(cluster, token_file, Source([]), kube={"watchCache": watch_cache})
    if not watch_cache:
        try:
            yield r
        finally:
            r.service.kube.close()
        return
    informers = r.service.informers
    assert informers is not None
    informers.start()
    try:
        deadline = utcnow() + timedelta(seconds=10)
        while informers.unsynced() and utcnow() < deadline:
            threading.Event().wait(0.05)
        assert not informers.unsynced()
        yield r
    finally:
        informers.stop(timeout=5)
        r.service.kube.close()


def test_a_restart_between_the_donors_write_and_the_growth_still_gives_the_donor_back(cluster: SimCluster,
                                                                                      token_file: Path) -> None:
    """The waiting growth lives in memory; the donor's sealed record does not. A reactor started after the donor
    gave, whose receiver never grew, finds the record in its watch cache once verify.timeout has passed since the
    write, and gives the donor back through the same act step (every rail), saying it was found after a restart."""
    _full(cluster)
    first = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    _outcome(first, "inference")
    assert _replicas(cluster, "training") == 1 and REBALANCE in cluster.get(
        "deployments", NAMESPACE, "training")["metadata"]["annotations"]
    cluster.settle()
    inference = cluster.get("deployments", NAMESPACE, "inference")
    inference["metadata"]["annotations"]["gpu-reactor.io/mode"] = "off"  # it will not grow any more
    cluster.apply(inference)
    first.service.kube.close()  # the process ends: its waiting list with it

    with _restarted(cluster, token_file) as second:
        rebalancer = second.service.rebalancer
        assert rebalancer.tick(utcnow()) == 0 and _replicas(cluster, "training") == 1  # too early: not yet
        assert rebalancer.tick(utcnow() + timedelta(minutes=11)) == 0
        assert _replicas(cluster, "training") == 2
        cluster.settle()
        assert _used(cluster) == 8 and not _events(cluster, "FailedCreate")
        second.flush_events()
        (given,) = _events(cluster, "RebalanceGivenBack")
        assert "found after a restart of the reactor" in given["message"]
        assert REBALANCE not in cluster.get("deployments", NAMESPACE, "training")["metadata"]["annotations"]
        assert second.metric("reactor_rebalances_total", result="given-back") == 1
        _cache_sees_no_record(second, "training")  # the watch delivers the give-back's write
        assert rebalancer.tick(utcnow() + timedelta(minutes=12)) == 0  # nothing left to find


def test_a_restart_after_the_receiver_grew_leaves_the_rebalance_to_its_resolve(cluster: SimCluster,
                                                                              token_file: Path) -> None:
    """A rebalance that completed (the receiver holds its sealed record of receiving from this donor) is not an
    orphan: a restarted reactor leaves the donor as it is; the receiver's resolve restores it, as without restart."""
    _full(cluster)
    first = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    _outcome(first, "inference")
    cluster.settle()
    assert first.service.rebalancer.tick(utcnow()) == 0  # the room shows: the receiver grows
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference")) == (1, 3)
    first.service.kube.close()

    with _restarted(cluster, token_file) as second:
        assert second.service.rebalancer.tick(utcnow() + timedelta(minutes=30)) == 0
        assert (_replicas(cluster, "training"), _replicas(cluster, "inference")) == (1, 3)
        assert second.metric("reactor_rebalances_total", result="given-back") == 0


def test_a_sealed_donor_record_copied_onto_another_workload_gives_it_nothing(cluster: SimCluster,
                                                                            token_file: Path) -> None:
    """A tenant copies the donor's whole sealed state (record and MAC) onto another Deployment, hoping a restarted
    reactor "gives back" GPUs to it: the MAC binds the state to the donor's uid, so the copy reads as unauthenticated
    and the recovery never picks it; the real donor alone is given back."""
    _full(cluster)
    first = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    _outcome(first, "inference")
    cluster.settle()
    inference = cluster.get("deployments", NAMESPACE, "inference")
    inference["metadata"]["annotations"]["gpu-reactor.io/mode"] = "off"
    cluster.apply(inference)
    first.service.kube.close()
    stolen = {k: v for k, v in cluster.get("deployments", NAMESPACE, "training")["metadata"]["annotations"].items()
              if k.startswith("gpu-reactor.io/") and k != "gpu-reactor.io/donor"}
    assert REBALANCE in stolen
    cluster.apply([_deployment("sidecar-job", 1, 0, "medium-priority-gpu")])
    other = cluster.get("deployments", NAMESPACE, "sidecar-job")
    other["metadata"]["annotations"].update(stolen)
    cluster.apply(other)
    cluster.settle()

    with _restarted(cluster, token_file) as second:
        rebalancer = second.service.rebalancer
        rebalancer.tick(utcnow() + timedelta(minutes=11))
        assert {w.donor.name for w in rebalancer.waiting()} <= {"training"}
        assert _replicas(cluster, "sidecar-job") == 1 and _replicas(cluster, "training") == 2
        second.flush_events()
        assert [e["involvedObject"]["name"] for e in _events(cluster, "RebalanceGivenBack")] == ["training"]


def test_a_second_full_quota_leaves_the_donor_untouched(cluster: SimCluster, token_file: Path) -> None:
    """gpu-quota full, and a second quota scoped to the receiver's PriorityClass (the donor's pods are not in it)
    full too: a donor's GPUs freed in gpu-quota would not let the receiver grow, so nobody gives. Seen on a real
    kube-apiserver v1.28 before: the donor gave 2 GPUs, restarted a pod, and got them back 31 s later."""
    scoped = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "high-gpus", "namespace": NAMESPACE},
              "spec": {"hard": {f"requests.{GPU}": "4"}, "scopeSelector": {"matchExpressions": [
                  {"scopeName": "PriorityClass", "operator": "In", "values": ["high-priority-gpu"]}]}}}
    cluster.apply(scoped)
    _full(cluster)
    used = cluster.get("resourcequotas", NAMESPACE, "high-gpus")["status"]["used"][f"requests.{GPU}"]
    assert used == "4"  # the receiver's two pods fill it
    source = Source(_idle(cluster, "training"))
    r = _reactor(cluster, token_file, source)
    before = {k: n for k, n in cluster.requests.items() if k[0] in ("patch", "update")}
    outcome = _outcome(r, "inference")
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded"), outcome
    assert "quota gpu-quota" in outcome["detail"] and "quota high-gpus" in outcome["detail"], outcome["detail"]
    assert source.asked == 0  # no donor looked for: a growth that cannot happen takes nothing
    assert {k: n for k, n in cluster.requests.items() if k[0] in ("patch", "update")} == before
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference")) == (2, 2)
    assert REBALANCE not in (cluster.get("deployments", NAMESPACE, "training")["metadata"].get("annotations") or {})


def test_the_shipped_policy_undoes_a_rebalance_on_the_receivers_resolve(cluster: SimCluster, token_file: Path) -> None:
    """deploy/reactor/policy.yaml reverts `set-priority-up` only, after 10m: a growth a donor paid for is undone
    on its resolve all the same (at once), and the donor is restored once the quota shows the room — otherwise a
    rebalance would be a permanent transfer."""
    import yaml

    shipped = yaml.safe_load((ROOT / "deploy" / "reactor" / "policy.yaml").read_text())
    assert shipped["revert"] == ["set-priority-up"] and shipped["revertAfter"] == "10m"
    _full(cluster)
    r = _reactor(cluster, token_file, Source(_idle(cluster, "training")), revert=shipped["revert"],
                 revertAfter=shipped["revertAfter"])
    _outcome(r, "inference")
    cluster.settle()
    assert r.service.rebalancer is not None and r.service.rebalancer.tick(utcnow()) == 0
    cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference"), _used(cluster)) == (1, 3, 8)
    body = r.alerts("GPUSaturated", "inference", "main", value=0.3, status="resolved")
    outcome = r.post(body).get_json()["outcomes"][0]
    assert (outcome["result"], outcome["action"], outcome["from"], outcome["to"]) == ("applied", "revert", 3, 2)
    cluster.settle()
    r.service.rebalancer.tick(utcnow())
    cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference"), _used(cluster)) == (2, 2, 8)
    assert r.metric("reactor_rebalances_total", result="restored") == 1


@pytest.mark.parametrize("watch_cache", [True, False], ids=["watch-cache", "no-watch-cache"])
def test_a_restart_between_the_receivers_resolve_and_the_donors_restore_still_restores_it(
        cluster: SimCluster, token_file: Path, watch_cache: bool) -> None:
    """The restore a resolve owes waits in memory until the quota shows the room; a restart loses that list. The
    receiver's revert dropped its `receiver` record in the same write, so the donor's sealed record names a
    receiver holding nothing of it: the restarted reactor finds the donor in its watch cache once verify.timeout
    has passed since it gave, and restores it once — a second pass finds nothing left to give."""
    _full(cluster)
    first = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    _outcome(first, "inference")
    cluster.settle()
    assert first.service.rebalancer is not None and first.service.rebalancer.tick(utcnow()) == 0
    cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference"), _used(cluster)) == (1, 3, 8)
    body = first.alerts("GPUSaturated", "inference", "main", value=0.3, status="resolved")
    outcome = first.post(body).get_json()["outcomes"][0]
    assert (outcome["result"], outcome["action"]) == ("applied", "revert")
    # The quota still counts the reverted pod: the restore waits in the first reactor's memory...
    assert _replicas(cluster, "training") == 1 and first.service.rebalancer.waiting() != []
    assert REBALANCE not in cluster.get("deployments", NAMESPACE, "inference")["metadata"]["annotations"]
    first.service.kube.close()  # ...and the process ends with it
    cluster.settle()

    with _restarted(cluster, token_file, watch_cache=watch_cache) as second:
        rebalancer = second.service.rebalancer
        assert rebalancer is not None
        assert rebalancer.tick(utcnow()) == 0 and _replicas(cluster, "training") == 1  # too early: not yet
        assert rebalancer.tick(utcnow() + timedelta(minutes=11)) == 0
        assert _replicas(cluster, "training") == 2
        cluster.settle()
        assert _used(cluster) == 8 and not _events(cluster, "FailedCreate")
        assert REBALANCE not in cluster.get("deployments", NAMESPACE, "training")["metadata"]["annotations"]
        if watch_cache:
            _cache_sees_no_record(second, "training")  # the watch delivers the restore's write
        assert rebalancer.tick(utcnow() + timedelta(minutes=12)) == 0  # paid once: nothing left to find
        assert _replicas(cluster, "training") == 2
        assert second.metric("reactor_rebalances_total", result="given-back") == 1
        second.flush_events()
        (given,) = _events(cluster, "RebalanceGivenBack")
        assert "its growth was undone on its resolve); found after a restart of the reactor" in given["message"]


def test_a_resolve_delivered_twice_to_two_replicas_restores_the_donor_once(cluster: SimCluster,
                                                                            token_file: Path) -> None:
    """An HA pair of Alertmanagers delivers the receiver's resolve to both replicas; each also scans for donors
    owed. The donor is restored once: one write, one Event, its record gone (the writes are conditional and the
    give-back reads the donor's sealed record for this receiver, which the first restore removes)."""
    _full(cluster)
    first = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    second = _reactor(cluster, token_file, Source([]))
    _outcome(first, "inference")
    cluster.settle()
    assert first.service.rebalancer is not None and first.service.rebalancer.tick(utcnow()) == 0
    cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference")) == (1, 3)
    body = first.alerts("GPUSaturated", "inference", "main", value=0.3, status="resolved")
    answers = [r.post(body).get_json()["outcomes"][0] for r in (first, second)]
    assert sorted((a["result"], a.get("action") or a.get("reason")) for a in answers) == [
        ("applied", "revert"), ("skipped", "already-applied")], answers
    cluster.settle()
    later = utcnow() + timedelta(minutes=11)
    for r in (first, second, first, second):
        assert r.service.rebalancer is not None
        r.service.rebalancer.tick(later)
        cluster.settle()
    assert (_replicas(cluster, "training"), _replicas(cluster, "inference"), _used(cluster)) == (2, 2, 8)
    for r in (first, second):
        r.flush_events()
    restored = _events(cluster, "RebalanceRestored") + _events(cluster, "RebalanceGivenBack")
    assert len(restored) == 1 and restored[0].get("count", 1) == 1, restored
    assert REBALANCE not in cluster.get("deployments", NAMESPACE, "training")["metadata"]["annotations"]


def test_an_older_receiver_record_put_back_does_not_hide_a_donor_owed(cluster: SimCluster, token_file: Path) -> None:
    """After the receiver's resolve (its growth undone, its `receiver` record dropped), its team puts back the older
    record the reactor sealed for it, to look as if it still held the donor's GPUs. The scan for donors owed reads
    records as the state ledger judges them (the ledger's copy: no record), so the donor is still found owed."""
    _full(cluster)
    r = _reactor(cluster, token_file, Source(_idle(cluster, "training")))
    _outcome(r, "inference")
    cluster.settle()
    assert r.service.rebalancer is not None and r.service.rebalancer.tick(utcnow()) == 0
    cluster.settle()
    sealed = dict(cluster.get("deployments", NAMESPACE, "inference")["metadata"]["annotations"])
    assert REBALANCE in sealed  # the receiver's record, as the reactor sealed it with the growth
    body = r.alerts("GPUSaturated", "inference", "main", value=0.3, status="resolved")
    assert r.post(body).get_json()["outcomes"][0]["action"] == "revert"
    inference = cluster.get("deployments", NAMESPACE, "inference")
    inference["metadata"]["annotations"] = {**inference["metadata"]["annotations"],
                                           **{k: v for k, v in sealed.items() if k.startswith("gpu-reactor.io/")}}
    cluster.apply(inference)  # the older record put back
    assert r.service.engine.rebalancing is not None
    for waiting in r.service.rebalancer.waiting():  # what a restart loses; the ledger (a Lease in production) stays
        r.service.engine.rebalancing.waitlist.discard(waiting)
    found = r.service.engine.rebalancing.recover(utcnow() + timedelta(minutes=11))
    assert [(w.donor.name, w.receiver.name) for w in found] == [("training", "inference")]
