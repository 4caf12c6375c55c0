"""Manifest builders for the simulator tests."""

from __future__ import annotations

from typing import Any

GPU = "nvidia.com/gpu"


def container(name: str = "main", gpus: int | None = 1, image: str = "img:1") -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": image}
    if gpus is not None:
        out["resources"] = {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}
    return out


def deployment(name: str = "web", ns: str = "ml", replicas: int = 1, gpus: int | None = 1,
               containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": containers or [container(gpus=gpus)]}}}}


def statefulset(name: str = "db", ns: str = "ml", replicas: int = 2, gpus: int | None = 1) -> dict[str, Any]:
    body = deployment(name, ns, replicas, gpus)
    body["kind"] = "StatefulSet"
    body["spec"]["serviceName"] = name
    return body


def pod(name: str = "p", ns: str = "ml", gpus: int | None = 1, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [container(gpus=gpus)], **spec}}


def gpu_node(name: str = "gpu-node-1", gpus: int = 8, *, ready: bool | None = True,
             taints: list[dict[str, Any]] | None = None, cpu: str = "64", memory: str = "512Gi") -> dict[str, Any]:
    """A Node with nvidia.com/gpu allocatable; `ready` None: its kubelet has posted no Ready condition yet."""
    room = {"cpu": cpu, "memory": memory, "pods": "110", GPU: str(gpus)}
    status: dict[str, Any] = {"capacity": dict(room), "allocatable": dict(room)}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                 "reason": "KubeletReady" if ready else "KubeletNotReady"}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints} if taints else {}, "status": status}
