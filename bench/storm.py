"""The alert storm: one notification of 10,000 alerts, counted at the API server, and the naive way.

The simulator counts every request it serves by (verb, resource, subresource); the storm's cost
is read from there, not from the reactor's own metrics, so nothing the reactor does is missed.
"""

from __future__ import annotations

import http.client
import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.naive import FakePrometheus, run_naive
from reactor_sim import SimCluster

READ_VERBS = frozenset({"get", "list", "watch"})
# The reactor's production default rate limit, to say what the storm would cost in waiting.
DEFAULT_QPS, DEFAULT_BURST = 20.0, 40


def post(port: int, body: bytes, token: str, timeout: float = 120.0) -> tuple[int, dict[str, Any], float]:
    """One webhook POST on a fresh connection: (status, answer, seconds)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        started = time.perf_counter()
        conn.request("POST", "/alerts", body=body, headers={"Content-Type": "application/json",
                                                           "Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        data = response.read()
        seconds = time.perf_counter() - started
    finally:
        conn.close()
    return response.status, json.loads(data or b"{}"), seconds


@dataclass
class ApiCount:
    """Requests the simulator served, by verb and by resource."""

    by_verb: dict[str, int]
    by_resource: dict[str, int]

    @classmethod
    def of(cls, requests: Counter[tuple[str, str, str]]) -> ApiCount:
        verbs: Counter[str] = Counter()
        resources: Counter[str] = Counter()
        for (verb, resource, sub), n in requests.items():
            verbs[verb] += n
            resources[f"{verb} {resource}{'/' + sub if sub else ''}"] += n
        return cls(dict(sorted(verbs.items())), dict(sorted(resources.items())))

    @property
    def reads(self) -> int:
        return sum(n for v, n in self.by_verb.items() if v in READ_VERBS)

    @property
    def writes(self) -> int:
        return sum(n for v, n in self.by_verb.items() if v not in READ_VERBS)

    @property
    def total(self) -> int:
        return sum(self.by_verb.values())


def limiter_seconds(requests: int, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST) -> float:
    """The least time a token bucket (qps, burst) makes `requests` back-to-back requests wait."""
    return max(0.0, (requests - burst) / qps)


def run_storm(sim: SimCluster, port: int, token: str, body: bytes, alerts: int, workloads: int) -> dict[str, Any]:
    sim.reset_counters()
    asked = confirm_requests()
    code, answer, seconds = post(port, body, token)
    if code != 200:
        raise RuntimeError(f"the storm was answered {code}: {str(answer)[:500]}")
    confirms = confirm_requests() - asked
    count = ApiCount.of(_settled(sim))
    outcomes = answer.get("outcomes", [])
    changed = {o["workload"] for o in outcomes if o["result"] == "applied"}
    limited = {o["workload"] for o in outcomes if o.get("reason") == "budget-exhausted"}
    patches = sum(n for k, n in count.by_resource.items() if k.startswith("patch "))
    return {
        "alerts": alerts, "pods": len({(o["namespace"], o["pod"]) for o in outcomes}), "workloads": workloads,
        "workloads_changed": len(changed), "workloads_budget_limited": len(limited),
        "summary": answer.get("summary", {}), "seconds": round(seconds, 3), "alerts_per_s": round(alerts / seconds, 1),
        "requests": count.total, "reads": count.reads, "writes": count.writes, "patches": patches,
        "by_verb": count.by_verb, "by_resource": count.by_resource,
        "default_limiter_s": round(limiter_seconds(count.total), 2),
        "confirm_requests": confirms,  # to Prometheus's rule API (the stand-in), not counted in `requests`
    }


def confirm_requests() -> int:
    """The rule-API requests the bench's Prometheus stand-in has answered so far (the reactors confirm against it)."""
    from bench.scenario import prometheus

    return prometheus().answered["/api/v1/rules"]


def _settled(sim: SimCluster, quiet: float = 0.5, limit: float = 10.0) -> dict[Any, int]:
    """The API server's request counts once the reactor's writes stopped: its Events leave on a background thread
    after the answer (act/posting.py), so the counts are read when nothing new came for `quiet` seconds."""
    deadline = time.monotonic() + limit
    seen = dict(sim.requests)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = dict(sim.requests)
        if now == seen:
            break
        seen = now
    return seen


def run_naive_storm(sim: SimCluster, namespaces: list[str]) -> dict[str, Any]:
    sim.reset_counters()
    with FakePrometheus(value=0.25) as prometheus:
        result = run_naive(sim.url, prometheus.url, namespaces)
        queries = sum(prometheus.requests.values())
    count = ApiCount.of(sim.requests)
    return {
        "pods": result.pods, "prometheus_queries": queries, "kube_requests": count.total,
        "requests": count.total + queries, "patch_codes": {str(k): v for k, v in sorted(result.patches.items())},
        "by_resource": count.by_resource, "seconds": round(result.seconds, 3),
    }
