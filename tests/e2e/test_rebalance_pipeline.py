"""End to end, rebalancing (issue 29): the donor's underutilization alert is live in the real Alertmanager, the
receiver's saturation triggers the move.

The seed's picture in one full 12-GPU quota (tests/e2e/rebalance.yaml, namespace ml-rebalance): `training`, one
4-GPU pod at 10 % (opted in as donor, medium priority, Recreate), `batch`, one busy 4-GPU pod (opted in too), and
`inference`, two 2-GPU pods (high priority). An idle alert for `batch` is forged: posted straight into Alertmanager,
where it ranks first (lower value than training's); Prometheus's rules never fire it, so the confirm step leaves
it out and `batch` gives nothing.
The mirror drives inference to 99 %: Prometheus fires GPUSaturated, Alertmanager delivers it, the reactor's
scale-replicas-up 2→3 is refused for lack of quota, the reactor asks Alertmanager's API v2 which workloads of the
namespace idle now, resizes training 4→1 GPU first, and scales inference up once the API server's quota usage shows
the room.

Why the donor's own alert does not shrink it first. With deploy/'s single route every idle alert also reaches the
reactor, one group_wait after it fires, and the reactor shrinks the donor on its own: the quota then has room and the
saturation grows without any rebalance. A donor therefore qualifies only while its own notification has not acted
yet (the donor's own decision, cooldown included, is the one that qualifies it), i.e. during a group_wait, a race.
The honest deterministic set-up is the one rebalancing is for: *donate on demand*. An operator routes the idle alerts
of the namespace to a receiver that is not the reactor (here Alertmanager's `default`, with no integration:
pipeline.DONOR_ON_DEMAND_ROUTE), so training keeps its GPUs while nobody needs them. The alert stays active in
Alertmanager (neither silenced nor inhibited), which is what the reactor's source asks for; the test checks that no
notification ever carried training's alerts to the reactor, so the shrink can only be the rebalance's.

What is read: every change of the ResourceQuota and of both Deployments, as the API server streams them (a watch from
the list's resourceVersion; one global resourceVersion orders them), so "quota never over hard" is checked on every
change of status.used, and "donor first, then the quota shows the room, then the receiver" on resourceVersions, not
on clocks. Delays are printed, never asserted beyond the bounded waits.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from reactor.engine.metrics import REBALANCE_RESULTS
from reactor.tools.payloads import rfc3339
from reactor_sim import SimCluster
from tests.e2e.mirror import ClusterMirror
from tests.e2e.pipeline import (
    DELAYS,
    GPU,
    REBALANCE_NAMESPACE,
    Delay,
    Pipeline,
    gpus,
    summary,
)
from tests.promstack.stack import Delivery

pytestmark = pytest.mark.promstack

MANIFESTS = Path(__file__).with_name("rebalance.yaml")
NS = REBALANCE_NAMESPACE
TIMEOUT = 90.0  # saturation (~10 s) + the rebalancer's pass (verify.interval, 15 s) + rollouts, generously
DONOR, RECEIVER, QUOTA, BUSY = "training", "inference", "gpu-quota", "batch"
USED = f"requests.{GPU}"
# GPU-equivalents: training 1 x 4 GPUs at 0.10; batch 1 x 4 at 0.60; inference 2 x 2 at 0.60
AT_REST = {DONOR: 0.40, BUSY: 2.40, RECEIVER: 2.40}
HARD = 12
SATURATED = 3.96  # inference 2 x 2 GPUs at 0.99


@dataclass(frozen=True)
class Change:
    rv: int
    at: float  # time.monotonic() when the stream delivered it
    type: str
    obj: dict[str, Any]


class ResourceWatch:
    """Every change of one resource in a namespace, as the API server's watch streams it (after listing it)."""

    def __init__(self, sim: SimCluster, path: str) -> None:
        self.sim, self.path = sim, path
        self.changes: list[Change] = []
        self.errors: list[str] = []
        self._conn: http.client.HTTPConnection | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch {path}", daemon=True)

    def start(self) -> ResourceWatch:
        listed = self._get(self.path)
        now = time.monotonic()
        for item in listed["items"]:
            self.changes.append(Change(int(item["metadata"]["resourceVersion"]), now, "LISTED", item))
        self._rv = listed["metadata"]["resourceVersion"]
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends the stream from this side: the reading thread meets the end of the connection and returns."""
        self._stopping.set()
        sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        if self._conn is not None:
            self._conn.close()

    def of(self, name: str) -> list[Change]:
        return [c for c in list(self.changes) if c.obj["metadata"]["name"] == name]

    def first(self, name: str, check: Callable[[dict[str, Any]], bool]) -> Change | None:
        return next((c for c in self.of(name) if check(c.obj)), None)

    def _connection(self) -> http.client.HTTPConnection:
        url = urlsplit(self.sim.url)
        return http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=None)

    def _get(self, path: str) -> dict[str, Any]:
        conn = self._connection()
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            assert response.status == 200, (path, response.status)
            return dict(json.loads(response.read()))
        finally:
            conn.close()

    def _run(self) -> None:
        self._conn = self._connection()
        try:
            self._conn.request("GET", f"{self.path}?watch=1&resourceVersion={self._rv}&timeoutSeconds=900")
            response = self._conn.getresponse()
            while line := response.readline():
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event["object"]
                self.changes.append(Change(int(obj["metadata"]["resourceVersion"]), time.monotonic(), event["type"],
                                           obj))
        except Exception as e:  # noqa: BLE001 - the test reads `errors`; after stop() the stream's end is expected
            if not self._stopping.is_set():
                self.errors.append(repr(e))


@dataclass
class Case:
    p: Pipeline
    mirror: ClusterMirror
    quotas: ResourceWatch
    deployments: ResourceWatch
    pods: dict[str, list[str]] = field(default_factory=dict)

    def deployment(self, name: str) -> dict[str, Any]:
        return self.p.sim.get("deployments", NS, name)


@pytest.fixture(scope="module")
def case(e2e_pipeline: Pipeline) -> Iterator[Case]:
    p = e2e_pipeline
    p.sim.load_manifests(MANIFESTS)
    p.wait(lambda: len(_running(p.sim, DONOR)) == 1 and len(_running(p.sim, BUSY)) == 1
           and len(_running(p.sim, RECEIVER)) == 2, timeout=30, what="the rebalance namespace's pods running")
    quotas = ResourceWatch(p.sim, f"/api/v1/namespaces/{NS}/resourcequotas").start()
    deployments = ResourceWatch(p.sim, f"/apis/apps/v1/namespaces/{NS}/deployments").start()
    assert p.mirror.cadvisor is not None
    mirror = ClusterMirror(p.sim, p.mirror.exporter, NS, p.mirror.cadvisor)
    for app, demand in AT_REST.items():
        mirror.set_demand(app, "deployments", app, demand)
    mirror.start()
    c = Case(p, mirror, quotas, deployments, {app: _running(p.sim, app) for app in (DONOR, BUSY, RECEIVER)})
    try:
        yield c
    finally:
        mirror.stop()
        for pod in mirror.reported():  # no series of this namespace outlive the case
            p.mirror.exporter.remove_pod(NS, pod)
            p.mirror.cadvisor.remove_pod(NS, pod)
        quotas.stop()
        deployments.stop()


def _running(sim: SimCluster, app: str) -> list[str]:
    pods = sim.list("pods", NS, label_selector=f"app={app}")
    return sorted(p["metadata"]["name"] for p in pods
                  if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))


def _active_in_alertmanager(c: Case, alertname: str, pods: list[str]) -> list[dict[str, Any]]:
    return [a for a in c.p.stack.alerts()
            if a["labels"].get("alertname") == alertname and a["labels"].get("namespace") == NS
            and a["labels"].get("pod") in pods and a["status"]["state"] == "active"]


def _carries(d: Delivery, pods: list[str]) -> bool:
    return any(a["labels"].get("namespace") == NS and a["labels"].get("pod") in pods for a in d.body.get("alerts", []))


def _used(quota: dict[str, Any]) -> tuple[int | None, int]:
    status = quota.get("status") or {}
    used = (status.get("used") or {}).get(USED)
    return (None if used is None else int(used)), int(quota["spec"]["hard"][USED])


def _event(c: Case, name: str, reason: str) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        return next((e for e in c.p.sim.list("events", NS)
                     if e.get("reason") == reason and e.get("involvedObject", {}).get("name") == name), None)

    return c.p.wait(find, timeout=15, what=f"a {reason} Event on {name}")


def test_an_idle_donor_live_in_alertmanager_gives_to_the_saturated_receiver(case: Case) -> None:
    c, p = case, case.p
    donor_pods, receiver_pods = c.pods[DONOR], c.pods[RECEIVER]
    # The real process exports every result from its start (core/metrics.py `_zero`), before any rebalance.
    exported = {ls.get("result") for n, ls, _v in p.reactor.samples() if n == "reactor_rebalances_total"}
    assert exported >= set(REBALANCE_RESULTS), exported
    moved_before = p.reactor.metric("reactor_rebalances_total", result="moved")
    source_ok_before = p.reactor.metric("reactor_alert_source_requests_total", result="ok")

    # The donor idles: its GPUUnderutilized is live in Alertmanager (routed to `default`, not to the reactor).
    (live,) = p.wait(lambda: _active_in_alertmanager(c, "GPUUnderutilized", donor_pods), timeout=60,
                     what="training's GPUUnderutilized active in Alertmanager")
    assert live["receivers"] == [{"name": "default"}]
    assert live["status"]["silencedBy"] == [] and live["status"]["inhibitedBy"] == []
    # A forged idle alert for the busy batch job, posted straight into Alertmanager (anyone who reaches 9093 can):
    # the donor's own labels with batch's pod, and a lower value than training's, so it would rank first.
    forged = {**live["labels"], "alertname": "GPUIdle"}
    for key in ("pod", "exported_pod"):
        if key in forged:
            forged[key] = c.pods[BUSY][0]
    for key in ("container", "exported_container"):
        if key in forged:
            forged[key] = "worker"
    _post_to_alertmanager(p, forged, {**live["annotations"], "value": "0.000"})
    p.wait(lambda: _active_in_alertmanager(c, "GPUIdle", c.pods[BUSY]), timeout=20,
           what="the forged GPUIdle of batch active in Alertmanager")
    busy_before = c.deployment(BUSY)
    # The receiver is measured before it is driven, so the saturation is timed from a known state.
    p.wait(lambda: p.stack.query(f'count(gpu_reactor:container_gpu_utilization:ratio{{namespace="{NS}",'
                                 f'pod=~"{"|".join(receiver_pods)}"}}) >= 2'),
           timeout=30, what="inference's pods recorded by Prometheus", every=0.2)
    p.wait(lambda: _used(p.sim.get("resourcequotas", NS, QUOTA)) == (HARD, HARD), timeout=10, what="the quota full")

    changed = time.monotonic()
    c.mirror.set_demand(RECEIVER, "deployments", RECEIVER, SATURATED)

    p.wait(lambda: c.deployment(RECEIVER)["spec"]["replicas"] == 3, timeout=TIMEOUT, what="inference scaled to 3")
    p.wait(lambda: (c.deployment(RECEIVER).get("status") or {}).get("readyReplicas") == 3, timeout=TIMEOUT,
           what="inference's third replica ready")

    # The donor shrank first, by the rebalance: resized 4→1 GPU (ceil(4 × 0.10 / 0.6)), Recreate, no surge.
    donor = c.deployment(DONOR)
    assert (donor["spec"]["replicas"], gpus(donor, "trainer")) == (1, ("1", "1"))
    assert '"role":"donor"' in donor["metadata"]["annotations"]["gpu-reactor.io/rebalance"]
    receiver = c.deployment(RECEIVER)
    assert (receiver["spec"]["replicas"], gpus(receiver, "server")) == (3, ("2", "2"))

    shrunk = c.deployments.first(DONOR, lambda o: gpus(o, "trainer") == ("1", "1"))
    grown = c.deployments.first(RECEIVER, lambda o: o["spec"]["replicas"] == 3)
    assert shrunk is not None and grown is not None
    room = next((q for q in c.quotas.of(QUOTA) if q.rv > shrunk.rv and (_used(q.obj)[0] or 0) <= HARD - 2), None)
    assert room is not None, [(q.rv, _used(q.obj)) for q in c.quotas.of(QUOTA)]
    assert shrunk.rv < room.rv < grown.rv  # donor written, then the quota shows the room, then the receiver
    # Every change of the quota the API server made, from before the drive to now: never over hard.
    seen = [(q.rv, *_used(q.obj)) for q in c.quotas.of(QUOTA)]
    assert all(used is None or used <= hard for _rv, used, hard in seen), seen
    assert not c.quotas.errors and not c.deployments.errors

    # The notification that triggered it: the first GPUSaturated of inference the reactor answered.
    trigger = p.delivery(lambda d: any(o.get("workload") == f"Deployment/{NS}/{RECEIVER}" and o.get("alert") ==
                                       "GPUSaturated" and o.get("status") == "firing"
                                       for o in (d.answer or {}).get("outcomes", [])),
                         timeout=5, what="the reactor's answer to inference's GPUSaturated")
    outcome, *others = [o for o in trigger.answer["outcomes"] if o.get("workload") == f"Deployment/{NS}/{RECEIVER}"]
    assert all(o["result"] == outcome["result"] for o in others)  # one decision per workload, one outcome per pod
    print(f"\ntrigger: {summary(trigger)}\n  outcome: {json.dumps(outcome)}")
    if outcome["result"] == "skipped":  # the growth waited for the quota to show the room (the rebalancer's pass)
        assert outcome["reason"] == "quota-exceeded"
        assert f"rebalance: Deployment/{DONOR} gave 3 GPUs of quota {QUOTA}" in outcome["detail"]
    else:  # the API server's quota showed the room already when the receiver was decided again, in the same answer
        assert (outcome["result"], outcome["action"], outcome["from"], outcome["to"]) == (
            "applied", "scale-replicas", 2, 3)
    # The forged donor gave nothing: the confirm step asked Prometheus's rule state, which never fired its idle alert.
    busy = c.deployment(BUSY)
    assert (busy["spec"]["replicas"], gpus(busy, "worker")) == (1, ("4", "4"))
    assert busy["metadata"]["resourceVersion"] == busy_before["metadata"]["resourceVersion"]
    assert "gpu-reactor.io/rebalance" not in (busy["metadata"].get("annotations") or {})
    # The donor's own alerts never reached the reactor: the shrink was the rebalance's.
    assert not [summary(d) for d in list(p.sink.deliveries) if _carries(d, donor_pods)]

    donated, received = _event(c, DONOR, "RebalanceDonated"), _event(c, RECEIVER, "RebalanceReceived")
    assert f"Deployment/{RECEIVER}" in donated["message"], donated["message"]
    assert f"Deployment/{DONOR}" in received["message"], received["message"]

    assert p.reactor.metric("reactor_rebalances_total", result="moved") - moved_before == 1
    assert p.reactor.metric("reactor_rebalance_gpus_moved_total") == 3
    assert p.reactor.metric("reactor_alert_source_requests_total", result="ok") > source_ok_before
    assert p.reactor.metric("reactor_actions_total", result="failed") == 0
    assert not c.mirror.errors and not _events(c, "FailedCreate")

    first = p.delivery(lambda d: any(a["labels"].get("alertname") == "GPUSaturated" and a["labels"].get("pod")
                                     in receiver_pods for a in d.body.get("alerts", [])),
                       timeout=5, what="the first GPUSaturated notification for inference")
    assert first.answered is not None
    delays = [Delay("5 rebalance: donor shrunk (resize-gpu 4->1)", first.at - changed, first.answered - changed,
                    shrunk.at - changed),
              Delay("5 rebalance: receiver grown (scale-replicas 2->3)", first.at - changed, first.answered - changed,
                    grown.at - changed)]
    DELAYS.extend(delays)
    print("\n" + "\n".join(d.line() for d in delays))
    print(f"quota {QUOTA} used/hard on each change: {[(used, hard) for _rv, used, hard in seen]}")
    print(f"room shown {room.at - shrunk.at:.1f} s after the donor's write; receiver grown {grown.at - room.at:.1f} s "
          f"after the room")


def _post_to_alertmanager(p: Pipeline, labels: dict[str, str], annotations: dict[str, str]) -> None:
    """What anyone who reaches 9093 can do: POST a postableAlert, as Prometheus does, valid for ten minutes."""
    now = datetime.now(UTC)
    postable = [{"labels": labels, "annotations": annotations, "startsAt": rfc3339(now),
                 "endsAt": rfc3339(now + timedelta(minutes=10)), "generatorURL": "http://forged.example/graph"}]
    request = urllib.request.Request(f"{p.stack.alertmanager_url}/api/v2/alerts", data=json.dumps(postable).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5):
        pass


def _events(c: Case, reason: str) -> list[dict[str, Any]]:
    return [e for e in c.p.sim.list("events", NS) if e.get("reason") == reason]
