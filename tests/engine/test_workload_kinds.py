"""Each kind of owner the reactor meets, over real HTTP against the embedded cluster (issue: policy)."""

from __future__ import annotations

from typing import Any

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor

GPU = "nvidia.com/gpu"


def _container(name: str, gpus: int) -> dict[str, Any]:
    count = str(gpus)
    return {"name": name, "image": "registry.example.com/train:1", "resources": {"limits": {GPU: count}, "requests": {GPU: count}}}


def _owner(kind: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
    meta = obj["metadata"]
    api = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    return [{"apiVersion": api, "kind": kind, "name": meta["name"], "uid": meta["uid"], "controller": True}]


def _pod(sim: SimCluster, name: str, owners: list[dict[str, Any]] | None, gpus: int = 4,
         labels: dict[str, str] | None = None) -> None:
    """A pod as its controller would create it: `labels` are those the owner's selector picks."""
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "labels": {"app": name, **(labels or {})}}
    if owners:
        meta["ownerReferences"] = owners
    sim.apply({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
               "spec": {"restartPolicy": "Never", "containers": [_container("train", gpus)]}})


def _selected(job: dict[str, Any]) -> dict[str, str]:
    """The labels the Job's (defaulted) selector matches."""
    return dict(job["spec"]["selector"]["matchLabels"])


def _cronjob(sim: SimCluster) -> dict[str, Any]:
    job_spec = {"template": {"spec": {"restartPolicy": "Never", "containers": [_container("train", 4)]}}}
    sim.apply({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": NAMESPACE},
               "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": job_spec}}})
    cron = sim.get("cronjobs", NAMESPACE, "nightly")
    sim.apply({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "nightly-29001234", "namespace": NAMESPACE, "ownerReferences": _owner("CronJob", cron)},
               "spec": job_spec})
    return sim.get("jobs", NAMESPACE, "nightly-29001234")


def _post(reactor: Reactor, name: str, pod: str, container: str, **kw: Any) -> list[dict[str, Any]]:
    r = reactor.post(notification([AlertSpec(name, NAMESPACE, pod, container, **kw)]))
    assert r.status_code == 200, r.get_json()
    return r.get_json()["outcomes"]


def test_cronjob_via_its_job_changes_the_jobtemplate_for_the_next_run(reactor: Reactor) -> None:
    job = _cronjob(reactor.sim)
    _pod(reactor.sim, "nightly-29001234-abcde", _owner("Job", job), labels=_selected(job))
    (o,) = _post(reactor, "GPUUnderutilized", "nightly-29001234-abcde", "train", value=0.1, gpus=4)
    assert (o["workload"], o["result"], o["from"], o["to"]) == (f"CronJob/{NAMESPACE}/nightly", "applied", 4, 1)
    cron = reactor.sim.get("cronjobs", NAMESPACE, "nightly")
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"][GPU] == container["resources"]["requests"][GPU] == "1"
    running = reactor.sim.get("jobs", NAMESPACE, "nightly-29001234")
    assert running["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] == "4", "a running Job is never patched"
    assert not any(k[0] == "patch" and k[1] in ("jobs", "pods") for k in reactor.sim.requests)


def test_a_bare_job_is_refused(reactor: Reactor) -> None:
    job_spec = {"template": {"spec": {"restartPolicy": "Never", "containers": [_container("train", 4)]}}}
    reactor.sim.apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "one-off", "namespace": NAMESPACE}, "spec": job_spec})
    one_off = reactor.sim.get("jobs", NAMESPACE, "one-off")
    _pod(reactor.sim, "one-off-xyz12", _owner("Job", one_off), labels=_selected(one_off))
    (o,) = _post(reactor, "GPUUnderutilized", "one-off-xyz12", "train", value=0.1, gpus=4)
    assert (o["result"], o["reason"], o["workload"]) == ("skipped", "unsupported-owner", f"Job/{NAMESPACE}/one-off")
    assert "template is immutable" in o["detail"]


def test_a_bare_pod_is_refused(reactor: Reactor) -> None:
    _pod(reactor.sim, "notebook", None)
    (o,) = _post(reactor, "GPUIdle", "notebook", "train", value=0.0, gpus=4)
    assert (o["result"], o["reason"]) == ("skipped", "unsupported-owner")
    assert not any(k[0] == "patch" for k in reactor.sim.requests)


def test_hpa_managed_deployment_is_not_scaled_but_may_be_resized(reactor: Reactor) -> None:
    reactor.sim.apply({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                       "metadata": {"name": "llm-inference", "namespace": NAMESPACE},
                       "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm-inference"},
                                "minReplicas": 1, "maxReplicas": 5}})
    outcomes = reactor.post(reactor.alerts("GPUIdle", "llm-inference", "server", value=0.0, gpus=4)).get_json()["outcomes"]
    (o,) = {(x["action"], x["from"], x["to"]): x for x in outcomes}.values()
    assert (o["action"], o["from"], o["to"]) == ("resize-gpu", 4, 1)
    assert o["considered"][0] == {"strategy": "scale-replicas-down", "reason": "hpa-managed"}
    assert reactor.sim.get("deployments", NAMESPACE, "llm-inference")["spec"]["replicas"] == 3


def test_idle_deployment_without_hpa_scales_down(reactor: Reactor) -> None:
    outcomes = reactor.post(reactor.alerts("GPUIdle", "llm-inference", "server", value=0.0, gpus=4)).get_json()["outcomes"]
    assert {(o["action"], o["from"], o["to"]) for o in outcomes} == {("scale-replicas", 3, 2)}
    assert reactor.sim.get("deployments", NAMESPACE, "llm-inference")["spec"]["replicas"] == 2
    reactor.sim.settle()
    assert len(reactor.pods("llm-inference")) == 2


def test_a_workload_still_rolling_out_is_not_touched(reactor: Reactor) -> None:
    body = reactor.alerts("GPUUnderutilized", "llm-inference", "server")
    deploy = reactor.sim.get("deployments", NAMESPACE, "llm-inference")
    deploy["spec"]["template"]["spec"]["containers"][1]["image"] = "registry.example.com/metrics-sidecar:1.1"
    reactor.sim.apply(deploy)  # a new template; no settle(), so the controller has not caught up
    outcomes = reactor.post(body).get_json()["outcomes"]
    assert {o["reason"] for o in outcomes} == {"rollout-in-progress"}
    reactor.sim.settle()
    outcomes = reactor.post(reactor.alerts("GPUUnderutilized", "llm-inference", "server")).get_json()["outcomes"]
    assert {o["result"] for o in outcomes} == {"applied"}


def test_recommend_mode_annotation_decides_but_does_not_write(reactor: Reactor) -> None:
    deploy = reactor.sim.get("deployments", NAMESPACE, "llm-inference")
    deploy["metadata"].setdefault("annotations", {})["gpu-reactor.io/mode"] = "recommend"
    reactor.sim.apply(deploy)
    outcomes = reactor.post(reactor.alerts("GPUUnderutilized", "llm-inference", "server")).get_json()["outcomes"]
    assert {(o["result"], o["from"], o["to"]) for o in outcomes} == {("recommended", 4, 3)}
    assert not any(k[0] == "patch" for k in reactor.sim.requests)


def test_off_mode_annotation_refuses(reactor: Reactor) -> None:
    sts = reactor.sim.get("statefulsets", NAMESPACE, "trainer")
    sts["metadata"].setdefault("annotations", {})["gpu-reactor.io/mode"] = "off"
    reactor.sim.apply(sts)
    outcomes = reactor.post(reactor.alerts("GPUSaturated", "trainer", "trainer", value=0.99)).get_json()["outcomes"]
    assert {o["reason"] for o in outcomes} == {"mode-off"}


def test_metrics_missing_holds_even_beside_an_underutilization_alert(reactor: Reactor) -> None:
    pods = reactor.pods("llm-inference")
    specs = [AlertSpec("GPUUnderutilized", NAMESPACE, p, "server", 0.02, 4) for p in pods[:2]]
    specs.append(AlertSpec("GPUMetricsMissing", NAMESPACE, pods[2], "server", 0.5, 4))
    outcomes = reactor.post(notification(specs, group_by=("namespace",))).get_json()["outcomes"]
    assert {o["reason"] for o in outcomes} == {"metrics-missing"}
    assert not any(k[0] == "patch" for k in reactor.sim.requests)
