"""Assertions on `ApiException` Status bodies, requests the official client cannot send, and a rollout step."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import ApiException

from reactor_sim import SimCluster
from tests.sim.builders import GPU


def status_of(call: Callable[[], Any], code: int) -> dict[str, Any]:
    """Run a client call that must fail with `code`; return its parsed Status body."""
    with pytest.raises(ApiException) as info:
        call()
    assert info.value.status == code, info.value.body
    body = json.loads(info.value.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == code
    return body


def send(sim: SimCluster, method: str, path: str, body: dict[str, Any],
         content_type: str = "application/json") -> tuple[int, Any]:
    """One request straight over HTTP, a body the official client would not send as is: its status and parsed
    body, a refusal included."""
    request = urllib.request.Request(sim.url + path, data=json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def set_gpus(sim: SimCluster, gpus: int, *, ns: str = "ml", name: str = "web") -> None:
    """Change the Deployment's GPUs per pod (a new template: a rollout) and settle."""
    d = sim.get("deployments", ns, name)
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: str(gpus)},
                                                                   "requests": {GPU: str(gpus)}}
    sim.apply(d)
    sim.settle()
