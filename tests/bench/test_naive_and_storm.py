"""The naive baseline makes the requests it claims; the storm's counting and the scenario's notifications."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.naive import FakePrometheus, run_naive
from bench.run import start_reactor
from bench.scenario import GPUS_PER_POD, IDLE_GPUS, TEAMS, Fleet, pod_alerts, restamp, storm_body, webhook_bodies
from bench.storm import ApiCount, limiter_seconds, run_naive_storm, run_storm
from reactor_sim import SimCluster

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_naive_baseline_queries_once_and_patches_once_per_pod(small_sim: SimCluster) -> None:
    namespaces = list(TEAMS[:2])
    pods = sum(len(small_sim.list("pods", ns)) for ns in namespaces)
    small_sim.reset_counters()
    with FakePrometheus(value=0.25) as prometheus:
        result = run_naive(small_sim.url, prometheus.url, namespaces)
        queries = dict(prometheus.requests)
    assert pods == 20
    assert (result.pods, result.queries, result.lists) == (pods, pods, 2)
    assert queries == {"/api/v1/query": pods}
    assert result.patches == Counter({422: pods})  # pod resources are immutable: answered, and counted
    assert small_sim.requests == Counter({("patch", "pods", ""): pods, ("list", "pods", ""): 2})


def test_run_naive_storm_reports_both_kinds_of_request(small_sim: SimCluster) -> None:
    result = run_naive_storm(small_sim, [TEAMS[0]])
    assert (result["pods"], result["prometheus_queries"], result["kube_requests"], result["requests"]) == (10, 10, 11, 21)
    assert result["patch_codes"] == {"422": 10}


def test_api_count_splits_reads_and_writes() -> None:
    count = ApiCount.of(Counter({("get", "pods", ""): 3, ("list", "pods", ""): 1, ("patch", "deployments", ""): 2,
                                 ("create", "events", ""): 2, ("update", "deployments", "scale"): 1}))
    assert (count.reads, count.writes, count.total) == (4, 5, 9)
    assert count.by_resource["update deployments/scale"] == 1


def test_limiter_seconds_is_the_token_bucket_floor() -> None:
    assert limiter_seconds(40) == 0.0
    assert limiter_seconds(240) == 10.0


def test_scenario_notifications_have_the_promised_shape() -> None:
    fleet = Fleet({"team-0": [f"model-0-abc-{i}" for i in range(30)], "team-1": ["model-0-def-0"]})
    assert len(pod_alerts("team-0", "p", T0)) == GPUS_PER_POD + IDLE_GPUS
    storm = json.loads(storm_body(fleet, T0))
    assert len(storm["alerts"]) == 31 * (GPUS_PER_POD + IDLE_GPUS)
    assert len({a["fingerprint"] for a in storm["alerts"]}) == len(storm["alerts"])
    hundred = [json.loads(b) for b in webhook_bodies(fleet, 100, 2, T0)]
    assert [len(b["alerts"]) for b in hundred] == [100, 10]  # team-1 has one pod only
    assert len({a["startsAt"] for b in hundred for a in b["alerts"]}) == 2
    single = webhook_bodies(fleet, 1, 3, T0)
    assert [len(json.loads(b)["alerts"]) for b in single] == [1, 1, 1]
    moved = json.loads(restamp(webhook_bodies(fleet, 10, 1, T0)[0], T0, T0 + timedelta(hours=1)))
    assert {a["startsAt"] for a in moved["alerts"]} == {"2026-01-01T01:00:00.000Z"}


def test_storm_through_the_reactor_child_changes_every_workload_with_one_patch_each(
        small_sim: SimCluster, tmp_path: Path) -> None:
    fleet = Fleet.read(small_sim)
    reactor = start_reactor(small_sim, tmp_path, "bench-token")
    try:
        result = run_storm(small_sim, reactor.port, "bench-token", storm_body(fleet, T0), 500, 50)
    finally:
        reactor.stop()
    assert (result["pods"], result["workloads_changed"], result["workloads_budget_limited"]) == (50, 50, 0)
    assert result["summary"] == {"applied": 500}
    assert result["by_resource"]["patch deployments"] == result["patches"] == 50
    assert result["by_resource"]["create events"] == 50
    assert result["reads"] + result["writes"] == result["requests"]
