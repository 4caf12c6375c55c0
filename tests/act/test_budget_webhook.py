"""The storm brake seen through the webhook: budgets per window, global and per namespace, over real time."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path

from freezegun import freeze_time

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings


def _add_deployments(sim: SimCluster, names: list[str], namespace: str = NAMESPACE) -> None:
    template = sim.get("deployments", NAMESPACE, "llm-inference")
    for name in names:
        d = copy.deepcopy(template)
        d["metadata"] = {"name": name, "namespace": namespace, "labels": {"app": name}}
        d["spec"]["replicas"] = 1
        d["spec"]["selector"] = {"matchLabels": {"app": name}}
        d["spec"]["template"]["metadata"] = {"labels": {"app": name}}
        d.pop("status", None)
        sim.apply(d)
    sim.settle()


def _storm(r: Reactor, apps: list[str], starts_at: datetime) -> dict[str, str]:
    specs = [AlertSpec("GPUUnderutilized", NAMESPACE, pod, "server", starts_at=starts_at)
             for app in apps for pod in r.pods(app)]
    outcomes = r.post(notification(specs)).get_json()["outcomes"]
    return {o["workload"].rsplit("/", 1)[1]: o.get("reason") or o["result"] for o in outcomes}


def test_global_budget_stops_actions_then_refills_after_the_window(sim: SimCluster, token_file: Path) -> None:
    apps = ["a1", "a2", "a3", "a4"]
    _add_deployments(sim, apps)
    r = build_reactor(sim, make_settings(token_file, budget={"global": {"actions": 2, "per": "10m"},
                                                             "namespace": {"actions": 100, "per": "10m"}}))
    start = datetime.now(UTC)
    with freeze_time(start, tick=True):
        first = _storm(r, apps, start)
    assert sorted(first.values()) == ["applied", "applied", "budget-exhausted", "budget-exhausted"]
    assert r.metric("reactor_workload_skips_total", reason="budget-exhausted") == 2
    assert r.metric("reactor_budget_used", scope="global") == 2
    sim.settle()
    waiting = [app for app, result in first.items() if result == "budget-exhausted"]
    with freeze_time(start + timedelta(minutes=5), tick=True):
        assert set(_storm(r, waiting, start + timedelta(minutes=5)).values()) == {"budget-exhausted"}
    with freeze_time(start + timedelta(minutes=10, seconds=30), tick=True):
        # Read when scraped, not when a notification was last handled: after the storm the window empties by itself.
        assert r.metric("reactor_budget_used", scope="global") == 0
    with freeze_time(start + timedelta(minutes=11), tick=True):
        assert set(_storm(r, waiting, start + timedelta(minutes=11)).values()) == {"applied"}


def test_namespace_budget_is_separate_from_the_global_one(sim: SimCluster, token_file: Path) -> None:
    apps = ["b1", "b2", "b3"]
    _add_deployments(sim, apps)
    r = build_reactor(sim, make_settings(token_file, budget={"global": {"actions": 100, "per": "10m"},
                                                             "namespace": {"actions": 1, "per": "10m"}}))
    results = _storm(r, apps, datetime.now(UTC))
    assert sorted(results.values()) == ["applied", "budget-exhausted", "budget-exhausted"]
    patched = [k for k, v in sim.requests.items() if k[0] == "patch" for _ in range(v)]
    assert len(patched) == 1
