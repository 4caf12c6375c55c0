"""The watch cache at scale: the whole reactor's memory and start with 100,000 cached objects (and 4,000).

The embedded cluster holds Deployments with 0 replicas and, for each, the ReplicaSets of its rollout history as the
Deployment controller builds them (k8s.io/kubernetes pkg/controller/deployment/sync.go `getNewReplicaSet`: the
template and selector with a `pod-template-hash`, the controller reference, the revision annotations), each with
the `managedFields` the API server writes (reactor_sim/managed_fields.py) and the last-applied annotation
`kubectl apply` adds. Measured on `reactor serve` (gunicorn master + worker), as a pod's memory is counted:

- the RSS (and PSS: the pages the two processes share counted once) of every process, idle (a cluster holding
  only the probe namespace) and after `/readyz` with everything cached; the growth divided by the objects cached;
- the seconds from the process start to `/readyz` answering 200;
- notifications sent while the first lists run: each answer's status and time, and whether its outcomes are
  those the same notification gets once the cache is synced (dry run: nothing is written, so both decide alike).

Nothing is asserted: the machine is shared; the load average is reported with the figures.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bench import procs
from bench.scenario import confirm
from reactor.cluster.trim import trimmed
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec
from reactor.tools.payloads import notification as payload
from reactor_sim import SimCluster
from reactor_sim.negotiation import partial
from reactor_sim.store import clone

GPU = "nvidia.com/gpu"
PROBE_NS = "cache-probe"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
READY_TIMEOUT = 600.0
SIZES = {"100k": (10_000, 9, 10), "4k": (2_000, 1, 1)}  # Deployments, ReplicaSets each, namespaces


def container(name: str) -> dict[str, Any]:
    """A serving container as GPU platforms write them: image, args, env, ports, probes, resources, mounts."""
    gpu = {GPU: "1", "cpu": "8", "memory": "64Gi"}
    return {"name": "server", "image": f"registry.example.com/models/{name}:2024.11.3",
            "args": ["--model", f"/models/{name}", "--port", "8000", "--max-batch", "32"],
            "env": [{"name": k, "value": v} for k, v in (("MODEL_NAME", name), ("LOG_LEVEL", "info"),
                                                          ("CUDA_VISIBLE_DEVICES", "all"), ("OMP_NUM_THREADS", "8"))],
            "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"},
                      {"name": "metrics", "containerPort": 9400, "protocol": "TCP"}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8000}, "periodSeconds": 10},
            "resources": {"limits": gpu, "requests": dict(gpu)},
            "volumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}]}


def deployment(namespace: str, name: str, replicas: int = 0) -> dict[str, Any]:
    labels = {"app": name, "team": namespace}
    spec = {"replicas": replicas, "revisionHistoryLimit": 10, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels}, "spec": {
                "priorityClassName": "medium-priority-gpu", "containers": [container(name)],
                "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "models"}}]}}}
    body: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}, "spec": spec}
    body["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(body, separators=(",", ":"))}  # `kubectl apply`
    return body


def replica_set(deploy: dict[str, Any], revision: int) -> dict[str, Any]:
    """deployment/sync.go `getNewReplicaSet` for one revision of `deploy`'s template."""
    meta, spec = deploy["metadata"], deploy["spec"]
    template = json.loads(json.dumps(spec["template"]))
    template["spec"]["containers"][0]["image"] += f"-r{revision}"
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
    template["metadata"]["labels"]["pod-template-hash"] = digest
    labels = dict(template["metadata"]["labels"])
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{digest}", "namespace": meta["namespace"], "labels": labels,
                         "annotations": {"deployment.kubernetes.io/desired-replicas": str(spec["replicas"]),
                                         "deployment.kubernetes.io/max-replicas": str(spec["replicas"] + 1),
                                         "deployment.kubernetes.io/revision": str(revision)},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"replicas": 0, "minReadySeconds": 0,
                     "selector": {"matchLabels": {**spec["selector"]["matchLabels"], "pod-template-hash": digest}},
                     "template": template}}


def populate(sim: SimCluster, deployments: int, per: int, namespaces: int, prefix: str) -> dict[str, Any]:
    """The objects: in each namespace the first Deployment and its ReplicaSets go through the API's write path
    (defaulting, validation, managedFields) and the controllers' status writes; the others are stamped from them
    (their own names, uids, hashes and last-applied annotation; the same fields), which at 100,000 objects takes
    seconds instead of many minutes. Returns the counts and the sizes of the objects as the API server serves them."""
    started = time.monotonic()
    api, names = sim.api, [f"{prefix}-{i}" for i in range(namespaces)]
    apply = "kubectl-client-side-apply"
    for ns in names:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    deploys, sets = api.registry.by_plural("deployments"), api.registry.by_plural("replicasets")
    per_ns = -(-deployments // namespaces)
    made = 0
    for ns in names:
        with sim.store.lock:
            first = api.create(deploys, ns, deployment(ns, "model-00000"), manager=apply)
            first_sets = []
            for revision in range(1, per + 1):
                rs = api.create(sets, ns, replica_set(first, revision))
                rs["status"] = {"replicas": 0, "observedGeneration": 1}
                first_sets.append(api.controller_write("replicasets", rs))
            first["status"] = _deployment_status(first)
            first = api.controller_write("deployments", first)
            for i in range(1, min(per_ns, deployments - made)):
                _stamp(sim, first, first_sets, f"model-{i:05d}")
        made += min(per_ns, deployments - made)
    sample_rs, sample_d = sim.list("replicasets", names[0])[-1], sim.list("deployments", names[0])[-1]
    return {"deployments": deployments, "replica_sets": deployments * per, "namespaces": names,
            "objects": deployments * (per + 1), "build_s": round(time.monotonic() - started, 1),
            "bytes_as_served": {"Deployment": len(json.dumps(sample_d)), "ReplicaSet": len(json.dumps(sample_rs))},
            "replica_set_bytes": {"as_served": len(json.dumps(sample_rs)),
                                  "cached (trimmed)": len(json.dumps(trimmed("ReplicaSet", sample_rs),
                                                                     separators=(",", ":"))),
                                  "PartialObjectMetadata": len(json.dumps(partial(sample_rs)))}}


def _stamp(sim: SimCluster, first: dict[str, Any], first_sets: list[dict[str, Any]], name: str) -> None:
    """A copy of `first` (and its ReplicaSets) named `name`, stored as the API server stores a new object."""
    old = first["metadata"]["name"]
    d = clone(first)
    meta = d["metadata"]
    meta.update(name=name, uid=sim.store.next_uid(), labels={**meta["labels"], "app": name})
    body = deployment(meta["namespace"], name)
    meta["annotations"] = body["metadata"]["annotations"]
    d["spec"] = body["spec"]
    d["status"]["conditions"][1]["message"] = d["status"]["conditions"][1]["message"].replace(old, name)
    sim.store.adopt("deployments", d)
    for rs in first_sets:
        copy = clone(rs)
        digest = hashlib.sha256(f"{name}/{rs['metadata']['name']}".encode()).hexdigest()[:10]
        m = copy["metadata"]
        m.update(name=f"{name}-{digest}", uid=sim.store.next_uid(),
                 labels={**m["labels"], "app": name, "pod-template-hash": digest})
        m["ownerReferences"][0].update(name=name, uid=meta["uid"])
        spec = copy["spec"]
        spec["selector"]["matchLabels"] = {"app": name, "pod-template-hash": digest}
        spec["template"]["metadata"]["labels"] = dict(m["labels"])
        sim.store.adopt("replicasets", copy)


def _deployment_status(deploy: dict[str, Any]) -> dict[str, Any]:
    """What the Deployment controller writes for a scaled-to-zero Deployment (deployment/sync.go calculateStatus)."""
    at = deploy["metadata"]["creationTimestamp"]
    return {"observedGeneration": deploy["metadata"]["generation"], "replicas": 0, "updatedReplicas": 0,
            "readyReplicas": 0, "availableReplicas": 0, "conditions": [
                {"type": "Available", "status": "True", "lastUpdateTime": at, "lastTransitionTime": at,
                 "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "lastUpdateTime": at, "lastTransitionTime": at,
                 "reason": "NewReplicaSetAvailable",
                 "message": f'ReplicaSet "{deploy["metadata"]["name"]}" has successfully progressed.'}]}


def probe_workload(sim: SimCluster) -> str:
    """One running GPU Deployment (a namespace of its own, built and settled before the bulk): the pod the
    notifications sent during the first lists name."""
    room = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}
    sim.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROBE_NS}},
               {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "medium-priority-gpu"}, "value": 1000},
               {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cache-node-0"},
                "status": {"capacity": room, "allocatable": dict(room),
                           "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}])
    body = deployment(PROBE_NS, "probe", replicas=1)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: "4"}, "requests": {GPU: "4"}}
    body["spec"]["template"]["spec"].pop("volumes")
    body["spec"]["template"]["spec"]["containers"][0].pop("volumeMounts")
    sim.apply(body)
    sim.settle()
    return str(next(p["metadata"]["name"] for p in sim.list("pods", PROBE_NS)))


def notification(pod: str) -> bytes:
    """GPUUnderutilized on the probe's 4 GPUs (1 in use), as the reactor's rules fire it."""
    starts = datetime(2026, 1, 1, tzinfo=UTC)
    specs = [AlertSpec("GPUUnderutilized", PROBE_NS, pod, "server", 0.25, 4, starts_at=starts,
                       extra_labels={"gpu": str(g)}) for g in range(4)]
    return json.dumps(payload(specs, group_by=("namespace",)), separators=(",", ":")).encode()


def _post(port: int, token: str, body: bytes) -> tuple[int, float, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/alerts", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            code, text = answer.status, answer.read()
    except urllib.error.HTTPError as e:
        code, text = e.code, e.read()
    except OSError:
        return 0, time.monotonic() - started, None
    try:
        return code, time.monotonic() - started, json.loads(text)
    except ValueError:
        return code, time.monotonic() - started, None


def _decisions(answer: Any) -> list[tuple[str, str, str]]:
    outcomes = (answer or {}).get("outcomes") or []
    return sorted((str(o.get("result")), str(o.get("reason", "")), str(o.get("action", ""))) for o in outcomes)


def _ready(probe_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{probe_port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False


def memory_of(pid: int) -> dict[str, Any]:
    """RSS and PSS (MB) of the process and its children, from /proc/PID/smaps_rollup."""
    rss = pss = 0.0
    pids = procs.tree(pid)
    for p in pids:
        try:
            lines = Path(f"/proc/{p}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("Rss:"):
                rss += int(line.split()[1]) / 1000
            elif line.startswith("Pss:"):
                pss += int(line.split()[1]) / 1000
    return {"processes": len(pids), "rss_mb": round(rss, 1), "pss_mb": round(pss, 1),
            "by_process_rss_mb": [round(procs.rss_mb(p), 1) for p in pids]}


def run_reactor(sim: SimCluster, tmp: Path, namespaces: list[str], pod: str, label: str) -> dict[str, Any]:
    """`reactor serve` allowed in `namespaces` and the probe's: start → /readyz, notifications meanwhile."""
    token = secrets.token_hex(16)
    (tmp / "token").write_text(token)
    policy = tmp / f"policy-{label}.yaml"
    policy.write_text(yaml.safe_dump({"namespaces": {"allow": [PROBE_NS, *namespaces]}, "dryRun": True,
                                      "kube": {"qps": 5000, "burst": 5000, "watchCache": True},
                                      "confirm": confirm()}))  # serve requires it; a start confirms nothing
    port, probe_port = procs.free_ports(2)
    env = {"REACTOR_SERVER__LISTEN": f"127.0.0.1:{port}", "REACTOR_SERVER__PROBE_LISTEN": f"127.0.0.1:{probe_port}",
           "REACTOR_SERVER__TOKEN_FILE": str(tmp / "token"), "REACTOR_STATE__KEY_FILE": str(state_key_file(tmp)),
           "REACTOR_KUBE__KUBECONFIG": sim.write_kubeconfig(tmp / "kubeconfig")}
    started = time.monotonic()
    child = procs.start(["-m", "reactor", "serve", "--config", str(policy)], port=port, log=tmp / f"{label}.log",
                        env=env, ready_path=None, timeout=READY_TIMEOUT)
    try:
        during: list[dict[str, Any]] = []
        while not _ready(probe_port):
            if time.monotonic() - started > READY_TIMEOUT:
                raise RuntimeError(f"not ready in {READY_TIMEOUT:.0f} s (see {tmp / f'{label}.log'})")
            if len(during) < 20:
                code, seconds, answer = _post(port, token, notification(pod))
                during.append({"code": code, "ms": round(seconds * 1000, 1), "decisions": _decisions(answer)})
            time.sleep(0.5)
        ready_s = time.monotonic() - started
        time.sleep(2.0)  # the worker settles after its lists (freed pages returned)
        memory = memory_of(child.pid)
        code, seconds, answer = _post(port, token, notification(pod))
        synced = {"code": code, "ms": round(seconds * 1000, 1), "decisions": _decisions(answer)}
        answered = [d for d in during if d["code"] == 200]
        return {"ready_s": round(ready_s, 1), "memory": memory, "during_sync": {
            "sent": len(during), "codes": sorted({d["code"] for d in during}),
            "ms": sorted(d["ms"] for d in during),
            "same_decisions_as_synced": all(d["decisions"] == synced["decisions"] for d in answered),
        }, "synced": synced}
    finally:
        child.stop()


def measure(tmp: Path, sizes: dict[str, tuple[int, int, int]] | None = None) -> dict[str, Any]:
    """Each size on a cluster of its own: the idle reactor (the probe namespace only), then with everything."""
    out: dict[str, Any] = {"load_average": os.getloadavg()}
    for label, (deployments, per, namespaces) in (sizes or SIZES).items():
        with SimCluster().start() as sim:
            pod = probe_workload(sim)
            idle = run_reactor(sim, tmp, [], pod, f"{label}-idle")
            built = populate(sim, deployments, per, namespaces, f"cache-{label}")
            full = run_reactor(sim, tmp, built["namespaces"], pod, label)
            grown = full["memory"]["pss_mb"] - idle["memory"]["pss_mb"]
            out[label] = {**{k: v for k, v in built.items() if k != "namespaces"}, "idle": idle, "cached": full,
                          "bytes_per_object_pss": round(grown * 1e6 / built["objects"]),
                          "bytes_per_object_rss": round((full["memory"]["rss_mb"] - idle["memory"]["rss_mb"])
                                                        * 1e6 / built["objects"])}
    out["load_average_after"] = os.getloadavg()
    return out


if __name__ == "__main__":  # `python -m bench.cache_scale [4k|100k ...]`: this step alone
    import sys
    import tempfile

    chosen = {k: SIZES[k] for k in sys.argv[1:]} or None
    with tempfile.TemporaryDirectory(prefix="gpu-reactor-cache-") as folder:
        print(json.dumps(measure(Path(folder), chosen), indent=2))
