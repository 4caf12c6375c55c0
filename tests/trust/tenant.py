"""A cluster as deployed, with a hostile tenant in it: the helpers of the trust-boundary tests.

The embedded cluster runs in RBAC mode with deploy/reactor's objects and the test GPU namespace. The
reactor talks to it with its ServiceAccount's token and the deployed policy (adjusted per test); the
tenant talks to it with its own token, through the official client, holding only a tenant's Role:
get/patch Deployments and create/get Pods in its namespace. Whatever the tenant does is therefore
what a real tenant could do, refused or allowed by RBAC, not by the test.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from reactor.app.assembly import assemble
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import build_settings
from reactor.core.metrics import Metrics
from reactor.state.ledger_codec import LEDGER_KEY, Entry, decode, encode
from reactor.state.seal import StateKeys, new_write
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from reactor_sim.status import ApiError
from tests.deploy.deploy_helpers import DEPLOY
from tests.support import HERE, NAMESPACE, Reactor, feeding_client, release, with_prometheus

SA_USER = "system:serviceaccount:gpu-reactor:gpu-reactor"
SA_TOKEN = "gpu-reactor-sa-token"
TENANT_USER = "team-b@example.com"
TENANT_TOKEN = "team-b-token"
GPU = "nvidia.com/gpu"
ENFORCE = {"gpu-reactor.io/mode": "enforce"}
_RBAC = "rbac.authorization.k8s.io"

TENANT_ROLE = {
    "apiVersion": f"{_RBAC}/v1", "kind": "Role", "metadata": {"name": "tenant", "namespace": NAMESPACE},
    "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "patch"]},
              {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create"]}],
}
TENANT_BINDING = {
    "apiVersion": f"{_RBAC}/v1", "kind": "RoleBinding", "metadata": {"name": "tenant", "namespace": NAMESPACE},
    "subjects": [{"kind": "User", "apiGroup": _RBAC, "name": TENANT_USER}],
    "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": "tenant"},
}


def deployed_cluster(reactor_objects: list[dict[str, Any]]) -> SimCluster:
    """The test namespace and deploy/reactor in an RBAC-mode cluster, a tenant and the reactor's token."""
    sim = SimCluster(rbac=True).start()
    fixture = yaml.safe_load_all((HERE / "fixtures" / "cluster.yaml").read_text())
    sim.apply([*[d for d in fixture if d], *copy.deepcopy(reactor_objects), TENANT_ROLE, TENANT_BINDING])
    for kind, name in (("deployments", "llm-inference"), ("statefulsets", "trainer")):
        obj = sim.get(kind, NAMESPACE, name)
        obj["metadata"].setdefault("annotations", {}).update(ENFORCE)
        sim.apply(obj)
    sim.settle()
    sim.add_token(SA_TOKEN, user=SA_USER)
    sim.add_token(TENANT_TOKEN, user=TENANT_USER)
    return sim


def deployed_reactor(sim: SimCluster, token_file: Path, *, clock: Callable[[], datetime] | None = None,
                     **overrides: Any) -> Reactor:
    """The reactor with the deployed policy (plus `overrides`), acting with its ServiceAccount's token."""
    doc = yaml.safe_load((DEPLOY / "reactor" / "policy.yaml").read_text())
    doc.update(server={"tokenFile": str(token_file)}, logging={"format": "text"},
               state={**(doc.get("state") or {}), "keyFile": str(state_key_file(token_file.parent))},
               kube={"timeout": "2s", "qps": 1000, "burst": 1000, "conflictRetries": 3})
    doc.update(overrides)
    settings, stand_in = with_prometheus(build_settings(doc, {}), instead=True)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    kube = KubeGateway.for_url(sim.url, settings.kube, metrics, token=SA_TOKEN)
    service = assemble(settings, kube=kube, metrics=metrics, **({"clock": clock} if clock is not None else {}))
    service.app.testing = True
    reactor = Reactor(service, feeding_client(service, stand_in), sim, registry, stand_in)
    release(reactor)
    return reactor


@contextmanager
def deployed(sim: SimCluster, token_file: Path, *, clock: Callable[[], datetime] | None = None,
             **overrides: Any) -> Iterator[Reactor]:
    """`deployed_reactor` whose API client is closed when the block ends."""
    r = deployed_reactor(sim, token_file, clock=clock, **overrides)
    try:
        yield r
    finally:
        r.service.kube.close()


class MinuteClock:
    """The reactor's clock, a minute on at each reading: steps of one test never share a second (a cooldown of
    0s still ends at the next whole second)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


# One action after another on one Deployment: no cooldown, hysteresis or revert hold in the way.
BOOSTING = {"cooldown": "0s", "reverseAfter": "0s", "revertAfter": "0s", "revert": ["scale-replicas-up"],
            "alerts": {"GPUSaturated": ["scale-replicas-up"]}}

def outcome_of(reactor: Reactor, spec: AlertSpec) -> dict[str, Any]:
    """The one outcome of a notification holding `spec` alone (answered 200)."""
    answer = reactor.post(notification([spec]))
    assert answer.status_code == 200, answer.get_json()
    (outcome,) = answer.get_json()["outcomes"]
    return dict(outcome)


def why(outcome: dict[str, Any]) -> str:
    """An outcome in one line, for an assertion's message."""
    return f"{outcome.get('result')} {outcome.get('reason')}: {outcome.get('detail')}"


LEDGER = ("gpu-reactor", "gpu-reactor-state")  # the state ledger's Lease, as deploy/reactor/policy.yaml names it


def sign_as_reactor(sim: SimCluster, keys: StateKeys, name: str, annotations: dict[str, str], *,
                    kind: str = "deployments") -> str:
    """Write state as the reactor would: sealed with its key under a new write, and that write made the latest in
    the ledger's Lease (the cluster admin does it here, not the tenant, who can touch neither). The write id."""
    obj = sim.get(kind, NAMESPACE, name)
    write = new_write()
    obj["metadata"].setdefault("annotations", {}).update(keys.sealed(obj["metadata"]["uid"], annotations, write))
    sim.apply(obj)
    try:
        lease = sim.get("leases", *LEDGER)
    except ApiError as e:
        assert e.code == 404, e
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": LEDGER[1], "namespace": LEDGER[0]}, "spec": {}}
    annotations_of = lease["metadata"].setdefault("annotations", {})
    entries = decode(annotations_of.get(LEDGER_KEY))
    entries[obj["metadata"]["uid"]] = Entry(write, datetime.now(UTC) + timedelta(hours=1), True)
    annotations_of[LEDGER_KEY] = encode(entries)
    sim.apply(lease)
    return write


def tenant_client(sim: SimCluster) -> k8s.ApiClient:
    config = k8s.Configuration(host=sim.url)
    config.api_key, config.api_key_prefix = {"BearerToken": TENANT_TOKEN}, {"BearerToken": "Bearer"}
    return k8s.ApiClient(config)


GHOSTS = 300


def ghost_specs(count: int = GHOSTS) -> list[AlertSpec]:
    """Alerts on `count` pods that do not exist, each with its own would-be controller name."""
    return [AlertSpec("GPUSaturated", NAMESPACE, f"ghost{i}-7d9f8b6c5-x{i:04d}", "server", 0.99, 4)
            for i in range(count)]


def template_of(sim: SimCluster, name: str) -> dict[str, Any]:
    """The pod template spec of a Deployment in the test namespace, as the cluster holds it."""
    return sim.get("deployments", NAMESPACE, name)["spec"]["template"]["spec"]
