"""The whole loop over real HTTP against the embedded cluster: alert → owner → one conditional patch."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from freezegun import freeze_time

from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

GPU = "nvidia.com/gpu"


def template_gpus(sim: SimCluster, resource: str, name: str, container: str) -> tuple[str, str]:
    spec = sim.get(resource, NAMESPACE, name)["spec"]["template"]["spec"]
    c = next(c for c in spec["containers"] if c["name"] == container)
    return c["resources"]["limits"][GPU], c["resources"]["requests"][GPU]


def events_for(sim: SimCluster, name: str) -> list[dict[str, Any]]:
    return [e for e in sim.list("events", NAMESPACE) if e["involvedObject"]["name"] == name
            and e.get("source", {}).get("component") == "gpu-reactor"]


def test_underutilization_shrinks_the_deployment_template_by_one_step(reactor: Reactor) -> None:
    body = reactor.alerts("GPUUnderutilized", "llm-inference", "server")  # no measured value → one step
    r = reactor.post(body)
    assert r.status_code == 200, r.get_json()
    outcomes = r.get_json()["outcomes"]
    assert len(outcomes) == 3
    assert {(o["result"], o["action"], o["from"], o["to"]) for o in outcomes} == {("applied", "resize-gpu", 4, 3)}
    assert template_gpus(reactor.sim, "deployments", "llm-inference", "server") == ("3", "3")
    meta = reactor.sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]
    last = json.loads(meta["annotations"][LAST_ACTION])
    assert (last["action"], last["from"], last["to"], last["container"]) == ("resize-gpu", 4, 3, "server")
    assert last["fingerprint"] in {a["fingerprint"] for a in body["alerts"]}
    assert json.loads(meta["annotations"][ORIGINAL])["gpus"] == {"server": 4}
    assert COOLDOWN_UNTIL in meta["annotations"]
    (event,) = events_for(reactor.sim, "llm-inference")
    assert event["reason"] == "GPUResized" and "4 -> 3" in event["message"]
    assert reactor.metric("reactor_actions_total", action="resize-gpu", result="applied", namespace=NAMESPACE) == 1
    assert reactor.metric("reactor_gpus_changed_total", direction="released", namespace=NAMESPACE) == 3
    assert reactor.metric("reactor_alerts_received_total", alertname="GPUUnderutilized", status="firing") == 3
    patches = {k: v for k, v in reactor.sim.requests.items() if k[0] == "patch"}
    assert patches == {("patch", "deployments", ""): 1}, "one write per workload, never a pod"


def test_the_same_notification_again_changes_nothing(reactor: Reactor) -> None:
    body = reactor.alerts("GPUUnderutilized", "llm-inference", "server")
    assert reactor.post(body).status_code == 200
    version = reactor.sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["resourceVersion"]
    again = reactor.post(body).get_json()["outcomes"]
    assert {(o["result"], o["reason"]) for o in again} == {("skipped", "already-applied")}
    # The repeat is refused from memory, before any read, and still names the workload like the first answer.
    assert {o["workload"] for o in again} == {f"Deployment/{NAMESPACE}/llm-inference"}
    assert reactor.sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["resourceVersion"] == version
    assert len(events_for(reactor.sim, "llm-inference")) == 1


def test_the_same_notification_to_a_fresh_reactor_is_recognised_from_the_annotations(sim: SimCluster, token_file: Path) -> None:
    """The dedup lives in the cluster: a restarted (or second) replica does not act again."""
    first = build_reactor(sim, make_settings(token_file))
    body = first.alerts("GPUUnderutilized", "llm-inference", "server")
    assert first.post(body).status_code == 200
    sim.settle()
    second = build_reactor(sim, make_settings(token_file))
    outcomes = second.post(body).get_json()["outcomes"]
    assert {o["reason"] for o in outcomes} == {"already-applied"}
    assert template_gpus(sim, "deployments", "llm-inference", "server") == ("3", "3")


def test_after_the_cooldown_a_new_firing_acts_again(reactor: Reactor) -> None:
    start = datetime.now(UTC)
    with freeze_time(start, tick=True):
        assert reactor.post(reactor.alerts("GPUUnderutilized", "llm-inference", "server")).status_code == 200
        reactor.sim.settle()
    later = start + timedelta(minutes=10)
    with freeze_time(later, tick=True):
        body = reactor.alerts("GPUUnderutilized", "llm-inference", "server", starts_at=later)
        outcomes = reactor.post(body).get_json()["outcomes"]
        assert {o["reason"] for o in outcomes} == {"cooldown"}
    after = start + timedelta(minutes=31)
    with freeze_time(after, tick=True):
        body = reactor.alerts("GPUUnderutilized", "llm-inference", "server", starts_at=after)
        outcomes = reactor.post(body).get_json()["outcomes"]
        assert {(o["result"], o.get("from"), o.get("to")) for o in outcomes} == {("applied", 3, 2)}
    assert template_gpus(reactor.sim, "deployments", "llm-inference", "server") == ("2", "2")


def test_measured_value_sizes_the_shrink(reactor: Reactor) -> None:
    """20% on 4 GPUs with a 60% target needs ceil(4 × 0.2 / 0.6) = 2 GPUs."""
    outcomes = reactor.post(reactor.alerts("GPUUnderutilized", "llm-inference", "server", value=0.20, gpus=4)).get_json()["outcomes"]
    assert {(o["from"], o["to"]) for o in outcomes} == {(4, 2)}


def test_saturation_grows_the_statefulset_within_quota(reactor: Reactor) -> None:
    outcomes = reactor.post(reactor.alerts("GPUSaturated", "trainer", "trainer", value=0.98, gpus=2)).get_json()["outcomes"]
    assert {(o["result"], o["action"], o["from"], o["to"]) for o in outcomes} == {("applied", "resize-gpu", 2, 3)}
    assert template_gpus(reactor.sim, "statefulsets", "trainer", "trainer") == ("3", "3")
    reactor.sim.settle()
    pods = reactor.sim.list("pods", NAMESPACE, label_selector="app=trainer")
    assert sorted(p["spec"]["containers"][0]["resources"]["limits"][GPU] for p in pods) == ["3", "3"]


def test_saturation_without_quota_headroom_is_refused(sim: SimCluster, token_file: Path) -> None:
    quota = sim.get("resourcequotas", NAMESPACE, "gpu-quota")
    quota["spec"]["hard"][f"requests.{GPU}"] = "16"  # 3×4 + 2×2 = 16 used
    sim.apply(quota)
    sim.settle()
    r = build_reactor(sim, make_settings(token_file, alerts={"GPUSaturated": ["resize-gpu-up"]}))
    outcomes = r.post(r.alerts("GPUSaturated", "trainer", "trainer", value=0.98)).get_json()["outcomes"]
    assert {o["reason"] for o in outcomes} == {"quota-exceeded"}
    assert "needs 2 GPUs of quota gpu-quota (replicas 2, surge 0), headroom 0" in outcomes[0]["detail"]
    assert template_gpus(sim, "statefulsets", "trainer", "trainer") == ("2", "2")
    assert not any(k[0] == "patch" for k in sim.requests)


def test_dry_run_recommends_and_writes_nothing(sim: SimCluster, token_file: Path) -> None:
    r = build_reactor(sim, make_settings(token_file, dryRun=True))
    outcomes = r.post(r.alerts("GPUUnderutilized", "llm-inference", "server")).get_json()["outcomes"]
    assert {(o["result"], o["from"], o["to"]) for o in outcomes} == {("recommended", 4, 3)}
    assert template_gpus(sim, "deployments", "llm-inference", "server") == ("4", "4")
    assert r.metric("reactor_actions_total", action="resize-gpu", result="recommended", namespace=NAMESPACE) == 1
    assert not any(k[0] in ("patch", "create") for k in sim.requests)


def test_a_stale_read_is_a_409_then_re_read_and_applied_once(reactor: Reactor) -> None:
    reactor.sim.inject_fault(verb="patch", resource="deployments", status=409, count=1)
    outcomes = reactor.post(reactor.alerts("GPUUnderutilized", "llm-inference", "server")).get_json()["outcomes"]
    assert {o["result"] for o in outcomes} == {"applied"}
    assert reactor.sim.requests[("patch", "deployments", "")] == 2
    assert template_gpus(reactor.sim, "deployments", "llm-inference", "server") == ("3", "3")


def test_a_replaced_pod_still_resolves_to_its_deployment(reactor: Reactor) -> None:
    body = reactor.alerts("GPUUnderutilized", "llm-inference", "server")
    reactor.post(body)
    reactor.sim.settle()
    old = {a["labels"]["pod"] for a in body["alerts"]}
    assert not old & set(reactor.pods("llm-inference")), "the rollout replaced every pod"
    resolved = dict(body, status="resolved", alerts=[dict(a, status="resolved", endsAt="2026-11-30T05:00:00Z") for a in body["alerts"]])
    outcomes = reactor.post(resolved).get_json()["outcomes"]
    assert {(o["workload"], o["reason"]) for o in outcomes} == {(f"Deployment/{NAMESPACE}/llm-inference", "resolved")}


def test_pods_of_one_workload_cost_one_read_each_kind(reactor: Reactor) -> None:
    """Three alerts on one Deployment: each object read once, one write, one Event."""
    reactor.post(reactor.alerts("GPUUnderutilized", "llm-inference", "server"))
    req = reactor.sim.requests
    assert req[("get", "deployments", "")] == 1
    assert req[("get", "replicasets", "")] == 1
    assert req[("list", "limitranges", "")] == 1 and req[("list", "resourcequotas", "")] == 1
    assert req[("create", "events", "")] == 1


def test_alert_outside_the_allow_list_never_reads_or_writes(reactor: Reactor) -> None:
    body = reactor.alerts("GPUUnderutilized", "llm-inference", "server")
    for a in body["alerts"]:
        a["labels"]["namespace"] = "other-team"
    outcomes = reactor.post(body).get_json()["outcomes"]
    assert {o["reason"] for o in outcomes} == {"namespace-not-allowed"}
    assert sum(reactor.sim.requests.values()) == 0
