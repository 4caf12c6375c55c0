"""User-defined adapters from the policy's `adapters.custom` section (issue 17): validated at start with
messages that name the key, and working over HTTP for a CRD the project does not know."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import freezegun
import pytest

from reactor.core.errors import ConfigError
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import GPU, container, custom, owner_ref
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

TRAINING_RUN = {"kind": "TrainingRun", "group": "ml.example.com", "version": "v1alpha1", "plural": "trainingruns",
                "children": ["StatefulSet"], "ownerLabel": "ml.example.com/run",
                "podSpec": "spec.worker.template.spec", "replicas": "spec.worker.replicas",
                "childName": "{owner}-worker"}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "trainingruns.ml.example.com"},
       "spec": {"group": "ml.example.com", "scope": "Namespaced",
                "names": {"kind": "TrainingRun", "plural": "trainingruns", "singular": "trainingrun"},
                "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "properties": {"worker": {
                                      "type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                      "properties": {"replicas": {"type": "integer", "minimum": 0}}}}},
                                  "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


def _settings(token_file: Path, entries: Any, **extra: Any) -> Any:
    return make_settings(token_file, **POLICY, adapters={"custom": entries, **extra})


@pytest.mark.parametrize(("change", "key", "message"), [
    ({"kind": "Deployment"}, "adapters.custom[0].kind", "built-in workload kind"),
    ({"kind": "Notebook"}, "adapters.custom[0].kind", "has an adapter already"),
    ({"group": "example"}, "adapters.custom[0].group", "an API group"),
    ({"version": "1"}, "adapters.custom[0].version", "an API version"),
    ({"children": ["ReplicaSet"]}, "adapters.custom[0].children", "'ReplicaSet' is not a kind"),
    ({"podSpec": "status.template"}, "adapters.custom[0].podSpec", "under spec"),
    ({"replicas": "spec.other.replicas"}, "adapters.custom[0].replicas", "must lie under spec.worker"),
    ({"ownerLabel": "bad label!"}, "adapters.custom[0].ownerLabel", "a label key"),
    ({"selector": "x"}, "adapters.custom[0].selector", "unknown key"),
    ({"childName": "worker"}, "adapters.custom[0].childName", "{owner}"),
    ({"childName": "{owner}-{owner}"}, "adapters.custom[0].childName", "{owner}"),
    ({"childName": "{owner}_W"}, "adapters.custom[0].childName", "{owner}"),
], ids=["builtin-kind", "duplicate", "group", "version", "children", "path", "replicas-subtree", "label",
        "unknown-key", "child-name-without-owner", "child-name-twice", "child-name-not-dns"])
def test_a_broken_adapter_is_refused_at_start_naming_the_key(tmp_path: Path, change: dict[str, Any], key: str,
                                                             message: str) -> None:
    with pytest.raises(ConfigError) as e:
        _settings(tmp_path / "token", [{**TRAINING_RUN, **change}])
    assert e.value.key == key and message in str(e.value)


def test_an_unknown_builtin_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no built-in adapter for 'LeaderWorkerSets'"):
        make_settings(tmp_path / "token", adapters={"builtin": ["LeaderWorkerSets"]})


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = build_reactor(sim, _settings(token_file, [TRAINING_RUN]))
    try:
        yield r
    finally:
        r.service.kube.close()


def _training_run(reactor: Reactor) -> dict[str, Any]:
    """The CRD and TrainingRun `bert`: 2 workers of 4 GPUs (the operator's StatefulSet not made)."""
    reactor.sim.apply(CRD)
    reactor.sim.apply({"apiVersion": "ml.example.com/v1alpha1", "kind": "TrainingRun",
                       "metadata": {"name": "bert", "namespace": NAMESPACE},
                       "spec": {"worker": {"replicas": 2,
                                           "template": {"spec": {"containers": [container("main", 4)]}}}}})
    return custom(reactor.sim, "trainingruns", "bert")


@pytest.fixture
def run(reactor: Reactor) -> dict[str, Any]:
    """A TrainingRun and the StatefulSet its (played) operator creates for it."""
    tr = _training_run(reactor)
    labels = {"ml.example.com/run": "bert"}
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
                       "metadata": {"name": "bert-worker", "namespace": NAMESPACE, "labels": labels,
                                    "ownerReferences": owner_ref(tr)},
                       "spec": {"replicas": 2, "serviceName": "", "selector": {"matchLabels": labels},
                                "template": {"metadata": {"labels": labels},
                                             "spec": tr["spec"]["worker"]["template"]["spec"]}}})
    reactor.sim.settle()
    return tr


def _post(reactor: Reactor, name: str, **kw: Any) -> dict[str, Any]:
    (outcome,) = reactor.post(notification([AlertSpec(name, NAMESPACE, "bert-worker-0", "main", **kw)])).get_json()[
        "outcomes"]
    return outcome


def test_a_user_defined_adapter_shrinks_and_scales_a_resource_the_project_does_not_know(
        reactor: Reactor, run: dict[str, Any]) -> None:
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert (outcome["result"], outcome["workload"]) == ("applied", f"TrainingRun/{NAMESPACE}/bert"), outcome
    worker = custom(reactor.sim, "trainingruns", "bert")["spec"]["worker"]
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] == "1"
    assert reactor.sim.requests[("patch", "statefulsets", "")] == 0
    reactor.sim.settle()
    # The StatefulSet the operator owns has not been updated by the (played) operator: its rollout is "done",
    # and the next alert of another kind scales the run's workers.
    with freezegun.freeze_time(datetime.now(UTC) + timedelta(seconds=5)):  # cooldown-until is whole seconds
        idle = _post(reactor, "GPUIdle", value=0.0, gpus=1)
    assert idle["result"] == "applied", (idle.get("reason"), idle.get("detail"))
    assert custom(reactor.sim, "trainingruns", "bert")["spec"]["worker"]["replicas"] == 1


def test_with_the_adapters_off_an_operators_pod_is_unsupported(sim: SimCluster, token_file: Path) -> None:
    reactor = build_reactor(sim, make_settings(token_file, **POLICY, adapters={"builtin": [], "custom": []}))
    try:
        reactor.sim.apply(CRD)
        reactor.sim.apply({"apiVersion": "ml.example.com/v1alpha1", "kind": "TrainingRun",
                           "metadata": {"name": "bert", "namespace": NAMESPACE},
                           "spec": {"worker": {"replicas": 1}}})
        tr = custom(reactor.sim, "trainingruns", "bert")
        reactor.sim.apply({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": "bert-worker-0", "namespace": NAMESPACE,
                                        "ownerReferences": owner_ref(tr)},
                           "spec": {"containers": [container("main", 4)]}})
        outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
        assert (outcome["reason"], outcome["workload"]) == ("unsupported-owner", f"TrainingRun/{NAMESPACE}/bert")
    finally:
        reactor.service.kube.close()


def _look_alike(reactor: Reactor, name: str, owner: dict[str, Any]) -> None:
    """A tenant's StatefulSet carrying another team's TrainingRun uid and the operator's label: not its name."""
    labels = {"ml.example.com/run": owner["metadata"]["name"]}
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
                       "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels,
                                    "ownerReferences": owner_ref(owner)},
                       "spec": {"replicas": 1, "serviceName": "", "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name}},
                                             "spec": {"containers": [container("main", 4)]}}}})
    reactor.sim.settle()


def test_a_look_alike_child_not_named_by_the_rule_changes_nothing(reactor: Reactor, run: dict[str, Any]) -> None:
    """Issue 24 item 8, as a tenant: the uid and the label are copied, the name the rule gives is not."""
    _look_alike(reactor, "mine", run)
    (outcome,) = reactor.post(notification([AlertSpec("GPUUnderutilized", NAMESPACE, "mine-0", "main", value=0.1,
                                                       gpus=4)])).get_json()["outcomes"]
    assert outcome["reason"] == "owner-unverified", outcome
    assert "childName rule names that StatefulSet bert-worker" in outcome["detail"]
    assert custom(reactor.sim, "trainingruns", "bert")["spec"] == run["spec"]


def test_without_a_naming_rule_a_custom_adapter_only_recommends(sim: SimCluster, token_file: Path) -> None:
    """A link nobody can confirm from the owner's side is believed for a recommendation, never for a write."""
    entry = {k: v for k, v in TRAINING_RUN.items() if k != "childName"}
    reactor = build_reactor(sim, _settings(token_file, [entry]))
    try:
        tr = _training_run(reactor)
        _look_alike(reactor, "bert-worker", tr)
        outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
        assert (outcome["result"], outcome["workload"]) == ("recommended", f"TrainingRun/{NAMESPACE}/bert"), outcome
        assert custom(reactor.sim, "trainingruns", "bert")["spec"] == tr["spec"]
        assert reactor.sim.requests[("patch", "trainingruns", "")] == 0
    finally:
        reactor.service.kube.close()
