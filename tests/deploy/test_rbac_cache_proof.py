"""The read cache's grants (list+watch in deploy/reactor) are sufficient and each one is needed.

Same method as test_rbac_proof.py: the rendered deploy/reactor in the embedded cluster with RBAC on, the
reactor as its ServiceAccount with the deployed policy, here with its informers running. As deployed,
every informer lists and follows its kind and a notification on a cached workload reads no workload.
Without any one list or watch grant, that kind's informer is refused (a 403 with the upstream message)
and /readyz names the refusal: the reactor is not ready, and its reads go to the API meanwhile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reactor.cluster.informer import Informers
from tests.deploy.deploy_helpers import render
from tests.deploy.test_rbac_proof import (
    CACHE_NEEDED,
    SA_USER,
    _cluster,
    _grants,
    _reactor,
    _without,
    deployment_resize,
)
from tests.support import NAMESPACE, Reactor, eventually

WORKLOAD_READS = {"deployments", "replicasets", "limitranges", "resourcequotas", "horizontalpodautoscalers",
                  "priorityclasses"}


@pytest.fixture(scope="module")
def reactor_objects() -> list[dict[str, Any]]:
    return render("reactor")


def _informers(r: Reactor) -> Informers:
    assert r.service.informers is not None
    return r.service.informers


def test_the_cache_follows_every_kind_with_the_deployed_grants(reactor_objects: list[dict[str, Any]],
                                                              token_file: Path) -> None:
    sim = _cluster(reactor_objects)
    r = _reactor(sim, token_file, cache=True)
    try:
        _informers(r).start()
        eventually(lambda: not _informers(r).unsynced())
        sim.reset_counters()
        answer = deployment_resize(r)
        assert answer.results == {("applied", "resize-gpu")}
        assert not [k for k in sim.requests if k[0] == "get" and k[1] in WORKLOAD_READS]
        assert not sim.denied
    finally:
        _informers(r).stop(timeout=5)
        r.service.kube.close()
        sim.stop()


@pytest.mark.parametrize("grant", sorted(CACHE_NEEDED), ids=lambda g: f"{g[2]}-{g[1]}")
def test_each_cache_grant_is_needed(reactor_objects: list[dict[str, Any]], token_file: Path,
                                    grant: tuple[str, str, str]) -> None:
    group, resource, verb = grant
    (role,) = {g[0] for g in _grants(reactor_objects) if g[1:] == grant}
    sim = _cluster(_without(reactor_objects, (role, group, resource, verb)))
    r = _reactor(sim, token_file, cache=True)
    scope = "at the cluster scope" if resource == "priorityclasses" else f'in the namespace "{NAMESPACE}"'
    forbidden = f'User "{SA_USER}" cannot {verb} resource "{resource}" in API group "{group}" {scope}'
    try:
        _informers(r).start()
        eventually(lambda: any(forbidden in u for u in _informers(r).unsynced()))
        assert {k[:2] for k in sim.denied} == {(verb, resource)}
    finally:
        _informers(r).stop(timeout=5)
        r.service.kube.close()
        sim.stop()
