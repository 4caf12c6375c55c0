"""Storms: one notification of 10,000 alerts, and 100 notifications a second.

The reactor runs with the production defaults (deploy/reactor/policy.yaml: 8 threads, kube qps 20
burst 40, budget 20 per 10 minutes globally and 5 per namespace) — only the body limit is raised
for the 10,000-alert notification (about 7 MB; see the report). Bounds: Alertmanager gives a
webhook 10 s; an overloaded reactor must say 503 (Alertmanager retries) rather than keep the
sender waiting or drop the connection; memory stays bounded.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.reliability.conftest import LONG
from tests.reliability.figures import FIGURES
from tests.reliability.harness import (
    Answer,
    Child,
    deployment_doc,
    missing_outcomes,
    namespace_docs,
    patches,
    pods_of,
    seed,
    state,
)

ALERTMANAGER_TIMEOUT = 10.0
BUDGET_GLOBAL, BUDGET_NAMESPACE = 20, 5  # the defaults


class RssSampler:
    """Samples the child's resident memory every 0.2 s in the background."""

    def __init__(self, child: Child) -> None:
        self.child = child
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - start, self.child.rss_mib()))
            self._stop.wait(0.2)

    @property
    def peak(self) -> float:
        return max((m for _, m in self.samples), default=0.0)


def test_one_notification_of_ten_thousand_alerts(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    """25 Deployments in 5 namespaces, 4 pods each, 100 alerts per pod (per GPU and per exporter
    instance) = 10,000 alerts.

    (The embedded cluster cannot hold 10,000 pods: its controllers are quadratic in pods.)
    Actions stop at the global budget; every other workload is answered `budget-exhausted`.
    """
    namespaces = [f"storm-{i}" for i in range(5)]
    apps = [f"w{d}" for d in range(5)]
    docs: list[dict[str, Any]] = []
    for ns in namespaces:
        docs += namespace_docs(ns, quota=100_000) + [deployment_doc(ns, a, replicas=4, gpus=8) for a in apps]
    seed(cluster, docs)
    specs = [AlertSpec("GPUUnderutilized", ns, pod, "main", 0.05, 8, extra_labels={"gpu": str(g % 8), "instance": f"10.0.0.{g // 8}:9400"})
             for ns in namespaces for a in apps for pod in pods_of(cluster, ns, a) for g in range(100)]
    body = notification(specs)
    assert len(body["alerts"]) == 10_000
    child = spawn(cluster, policy={"namespaces": {"allow": ["*"]}, "server": {"maxBodyBytes": 16 << 20}})
    cluster.reset_counters()
    with RssSampler(child) as rss:
        answer = child.post(body, timeout=60)
    changes = {(ns, a): state(cluster, "deployments", ns, a).changes for ns in namespaces for a in apps}
    FIGURES.add("storm 10k alerts", deliveries=1, applied=sum(changes.values()), expected=BUDGET_GLOBAL,
                double=sum(max(0, c - 1) for c in changes.values()), lost=missing_outcomes(body, answer),
                max_latency_s=answer.seconds, peak_rss_mib=rss.peak)
    assert answer.status == 200, answer.body
    assert answer.seconds < ALERTMANAGER_TIMEOUT, f"10,000 alerts took {answer.seconds:.1f} s"
    assert missing_outcomes(body, answer) == 0 and len(answer.outcomes) == 10_000
    assert sum(changes.values()) == BUDGET_GLOBAL and max(changes.values()) == 1
    per_namespace = Counter(ns for (ns, _), c in changes.items() if c)
    assert max(per_namespace.values()) <= BUDGET_NAMESPACE, per_namespace
    assert patches(cluster, "deployments") == BUDGET_GLOBAL
    results = Counter((o["result"], o.get("reason")) for o in answer.outcomes)
    assert results == {("applied", None): BUDGET_GLOBAL * 400, ("skipped", "budget-exhausted"): 10_000 - BUDGET_GLOBAL * 400}


def mixed_notifications(cluster: SimCluster, namespaces: list[str], apps: list[str], count: int) -> list[dict[str, Any]]:
    """What a busy Alertmanager sends: new firings, repeats, pods already gone, alerts the reactor ignores."""
    pods = [(ns, p) for ns in namespaces for a in apps for p in pods_of(cluster, ns, a)]
    t0 = datetime.now(UTC) - timedelta(minutes=10)
    out = []
    for k in range(count):
        ns, pod = pods[k % len(pods)]
        kind = k % 4
        if kind == 0:
            specs = [AlertSpec("GPUUnderutilized", ns, pod, "main", starts_at=t0 + timedelta(milliseconds=k))]
        elif kind == 1:
            specs = [AlertSpec("GPUUnderutilized", ns, pod, "main", starts_at=t0)]
        elif kind == 2:
            specs = [AlertSpec("GPUIdle", ns, f"{apps[k % len(apps)]}-6d5f7c9b8-gone{k % 10}", "main", starts_at=t0),
                     AlertSpec("GPUIdle", ns, pod, "main", starts_at=t0)]
        else:
            specs = [AlertSpec("NodeDiskPressure", ns, pod, "main", starts_at=t0)]
        out.append(notification(specs, t0))
    return out


RATE = 100
SECONDS = 60 if LONG else 5  # the long form: a minute


def run_load(child: Child, bodies: list[dict[str, Any]], rate: float) -> list[tuple[dict[str, Any], Answer | None, float]]:
    """Open loop: each notification is sent at its time whatever happened to the others; latency is
    measured from that time, so a queue anywhere (client included) counts against the reactor."""
    results: list[tuple[dict[str, Any], Answer | None, float]] = []
    lock = threading.Lock()

    def send(body: dict[str, Any], due: float) -> None:
        try:
            answer: Answer | None = child.post(body, timeout=ALERTMANAGER_TIMEOUT + 5)
        except OSError:
            answer = None  # timed out or refused: Alertmanager would call this a failed delivery
        with lock:
            results.append((body, answer, time.monotonic() - due))

    start = time.monotonic() + 0.2
    with ThreadPoolExecutor(max_workers=400) as pool:
        for k, body in enumerate(bodies):
            due = start + k / rate
            time.sleep(max(0.0, due - time.monotonic()))
            pool.submit(send, body, due)
    return results


def test_a_hundred_notifications_a_second(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    namespaces, apps = ["rate-0", "rate-1"], [f"w{d}" for d in range(10)]
    seed(cluster, [d for ns in namespaces for d in namespace_docs(ns, quota=100_000)
                   + [deployment_doc(ns, a, replicas=2, gpus=8) for a in apps]])
    child = spawn(cluster, policy={"namespaces": {"allow": ["*"]}})
    bodies = mixed_notifications(cluster, namespaces, apps, RATE * SECONDS)
    encoded = [json.dumps(b) for b in bodies]
    assert len(set(encoded)) < len(encoded), "the mix has repeats"
    baseline = child.rss_mib()
    with RssSampler(child) as rss:
        results = run_load(child, bodies, RATE)
    statuses = Counter(a.status if a else "no answer" for _, a, _ in results)
    latencies = sorted(lat for _, _, lat in results)
    lost = sum(missing_outcomes(b, a) for b, a, _ in results if a) + statuses["no answer"]
    applied = {o["workload"] for _, a, _ in results if a and a.status == 200 for o in a.outcomes if o["result"] == "applied"}
    changes = {f"Deployment/{ns}/{a}": state(cluster, "deployments", ns, a).changes for ns in namespaces for a in apps}
    FIGURES.add(f"storm {RATE}/s x {SECONDS}s", deliveries=len(results), duplicates=len(encoded) - len(set(encoded)),
                applied=sum(changes.values()), expected=len(applied), double=sum(max(0, c - 1) for c in changes.values()),
                lost=lost, answers_503=statuses[503], max_latency_s=latencies[-1], peak_rss_mib=rss.peak)
    print(f"{len(results)} sent at {RATE}/s: {dict(statuses)}; latency p50 {latencies[len(latencies) // 2]:.3f} s, "
          f"p99 {latencies[int(len(latencies) * 0.99)]:.3f} s, max {latencies[-1]:.3f} s; RSS {baseline:.0f} → peak {rss.peak:.0f} MiB")
    assert len(results) == RATE * SECONDS
    assert set(statuses) <= {200, 503}, f"answers other than 200/503, or none: {statuses}"
    assert latencies[-1] < ALERTMANAGER_TIMEOUT, f"slowest answer {latencies[-1]:.1f} s after its send time"
    assert statuses[503] > 0 and statuses[200] > 0, "the load must overload the API budget (qps 20), and still be served"
    assert lost == 0
    assert {w for w, c in changes.items() if c} == applied and max(changes.values()) <= 1
    assert rss.peak - baseline < 100, f"RSS grew from {baseline:.0f} to {rss.peak:.0f} MiB"
    if LONG:  # no steady growth: the last third of the run stays near the first third
        third = SECONDS / 3
        early = max(m for t, m in rss.samples if t < third)
        late = max(m for t, m in rss.samples if t > 2 * third)
        assert late - early < 25, f"RSS kept growing: {early:.0f} MiB in the first third, {late:.0f} MiB in the last"
