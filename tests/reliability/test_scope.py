"""No effect outside the allowed namespaces: not with the plain labels, not with `exported_*`
spellings that disagree with them, not with `allow: ["*"]` against the system namespaces.

The `exported_*` spelling names the workload (FACTS.md): an exporter in an allowed namespace
reporting on a pod in a denied one is refused, and an exporter in a denied namespace reporting on
a pod in an allowed one is honoured — the positive controls show the same requests do act where
they may, so the refusals are not just a broken pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.reliability.conftest import LONG
from tests.reliability.figures import FIGURES
from tests.reliability.harness import Child, deployment_doc, namespace_docs, pods_of, seed, state, writes
from tests.support import TOKEN, Reactor, build_reactor, make_settings

ALLOWED = "ml"
WORKLOADS = {ALLOWED: "web", "other-team": "victim", "kube-system": "dcgm", "gpu-operator": "exporter", "kube-public": "pub"}
DENIED = {ns: name for ns, name in WORKLOADS.items() if ns != ALLOWED}


def build(sim: SimCluster) -> dict[str, str]:
    """One single-pod Deployment per namespace; returns namespace → its pod's name."""
    docs: list[dict[str, Any]] = []
    for ns, name in WORKLOADS.items():
        docs += [d for d in namespace_docs(ns) if ns not in ("kube-system", "kube-public") or d["kind"] != "Namespace"]
        docs.append(deployment_doc(ns, name))
    seed(sim, docs)
    return {ns: pods_of(sim, ns, name)[0] for ns, name in WORKLOADS.items()}


def alert(labels: dict[str, str]) -> dict[str, Any]:
    """A GPUIdle notification whose one alert carries exactly `labels` (plus alertname)."""
    doc = notification([AlertSpec("GPUIdle", "x", "x", "main", 0.0, 4)])
    doc["alerts"][0]["labels"] = {"alertname": "GPUIdle", "reactor": "gpu", "container": "main", **labels}
    return doc


def denied_untouched(sim: SimCluster) -> None:
    for ns, name in DENIED.items():
        s = state(sim, "deployments", ns, name)
        assert (s.changes, s.last_action, s.gpus) == (0, None, "4"), f"{ns}/{name} was changed"


def test_denied_namespaces_are_never_touched_whatever_the_spelling(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    pods = build(cluster)
    child = spawn(cluster, policy={"namespaces": {"allow": [ALLOWED]}})
    refused = {
        "plain other-team": {"namespace": "other-team", "pod": pods["other-team"]},
        "plain kube-system": {"namespace": "kube-system", "pod": pods["kube-system"]},
        "exporter in allowed, pod in denied": {"namespace": ALLOWED, "pod": "dcgm-exporter-x", "exported_namespace": "other-team",
                                               "exported_pod": pods["other-team"]},
        "exporter in allowed, pod in kube-system": {"namespace": ALLOWED, "pod": pods[ALLOWED], "exported_namespace": "kube-system",
                                                    "exported_pod": pods["kube-system"]},
        "empty exported_namespace falls back": {"namespace": "other-team", "exported_namespace": "", "pod": pods["other-team"]},
    }
    cluster.reset_counters()
    for case, labels in refused.items():
        answer = child.post(alert(labels))
        assert answer.status == 200 and answer.reasons() == {("skipped", "namespace-not-allowed")}, (case, answer.body)
    assert sum(cluster.requests.values()) == 0, f"a refused alert reached the API server: {cluster.requests}"
    # Allowed namespace, but a pod that only exists elsewhere: read, not found, nothing written.
    elsewhere = child.post(alert({"namespace": ALLOWED, "pod": pods["other-team"]}))
    assert elsewhere.reasons() == {("skipped", "not-found")}
    assert writes(cluster) == 0
    # The positive control: exporter in a denied namespace, workload in the allowed one → acts there.
    control = child.post(alert({"namespace": "gpu-operator", "pod": pods["gpu-operator"], "exported_namespace": ALLOWED,
                                "exported_pod": pods[ALLOWED]}))
    assert control.reasons() == {("applied", None)} and control.outcomes[0]["workload"] == f"Deployment/{ALLOWED}/web"
    assert state(cluster, "deployments", ALLOWED, "web").changes == 1
    denied_untouched(cluster)
    FIGURES.add("scope", deliveries=len(refused) + 2, applied=1, expected=1, fuzz_cases=len(refused) + 1)


def test_allow_star_still_denies_the_system_namespaces(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    pods = build(cluster)
    child = spawn(cluster, policy={"namespaces": {"allow": ["*"]}})
    for ns in ("kube-system", "kube-public"):
        answer = child.post(alert({"namespace": ns, "pod": pods[ns]}))
        assert answer.reasons() == {("skipped", "namespace-not-allowed")}, answer.body
        answer = child.post(alert({"namespace": ALLOWED, "exported_namespace": ns, "pod": "x", "exported_pod": pods[ns]}))
        assert answer.reasons() == {("skipped", "namespace-not-allowed")}, answer.body
    control = child.post(alert({"namespace": "other-team", "pod": pods["other-team"]}))  # "*" admits it
    assert control.reasons() == {("applied", None)}
    for ns in ("kube-system", "kube-public"):
        s = state(cluster, "deployments", ns, WORKLOADS[ns])
        assert (s.changes, s.last_action) == (0, None)
    FIGURES.add("scope", deliveries=5, applied=1, expected=1, fuzz_cases=4)


@pytest.fixture(scope="module")
def inprocess(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Reactor, dict[str, str]]]:
    sim = SimCluster().start()
    pods = build(sim)
    token = tmp_path_factory.mktemp("scope") / "token"
    token.write_text(TOKEN)
    reactor = build_reactor(sim, make_settings(token, namespaces={"allow": [ALLOWED]}))
    try:
        yield reactor, pods
    finally:
        reactor.service.kube.close()
        sim.stop()


SPELLINGS = st.sampled_from([None, ALLOWED, *DENIED, "kube-node-lease", "ML", "ml "])


@settings(max_examples=1000 if LONG else 150, deadline=None, database=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.too_slow])
@given(namespace=SPELLINGS, exported_namespace=SPELLINGS, pod_from=SPELLINGS, exported_pod_from=SPELLINGS,
       alertname=st.sampled_from(["GPUIdle", "GPUUnderutilized", "GPUSaturated", "GPUMemorySaturated"]))
def test_any_mix_of_spellings_acts_only_in_the_allowed_namespace(inprocess: tuple[Reactor, dict[str, str]], namespace: str | None,
                                                                 exported_namespace: str | None, pod_from: str | None,
                                                                 exported_pod_from: str | None, alertname: str) -> None:
    reactor, pods = inprocess
    labels = {k: v for k, v in {"namespace": namespace, "exported_namespace": exported_namespace,
                                "pod": pods.get(pod_from or "", pod_from), "exported_pod": pods.get(exported_pod_from or "", exported_pod_from)}.items()
              if v is not None}
    doc = alert(labels)
    doc["alerts"][0]["labels"]["alertname"] = alertname
    response = reactor.post(doc)
    assert response.status_code == 200, response.get_json()
    (outcome,) = response.get_json()["outcomes"]
    effective = exported_namespace or namespace
    assert outcome["namespace"] == effective
    if outcome["result"] == "applied":
        assert effective == ALLOWED and outcome["workload"].startswith(f"Deployment/{ALLOWED}/")
    if effective != ALLOWED:
        assert outcome["result"] == "skipped"
    denied_untouched(reactor.sim)
    FIGURES.add("scope", fuzz_cases=1)
