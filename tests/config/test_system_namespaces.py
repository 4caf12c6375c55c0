"""System namespaces stay out of reach unless named: setting `namespaces.deny` adds to the denied
namespaces, it does not replace the built-in kube-system / kube-public / kube-node-lease, and
`allow: ['*']` never admits them (issue 12: `allow: ['*']` plus any deny used to allow kube-system)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reactor.config.settings import build_settings
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.reliability.harness import deployment_doc, namespace_docs, pods_of, seed, state
from tests.support import build_reactor, make_settings

SYSTEM = ("kube-system", "kube-public", "kube-node-lease")


def allowed(namespaces: dict[str, Any]) -> dict[str, bool]:
    policy = build_settings({"namespaces": namespaces}, {}).policy
    return {ns: policy.namespace_allowed(ns) for ns in (*SYSTEM, "team-a", "team-b")}


@pytest.mark.parametrize("namespaces,admitted", [
    ({"allow": ["*"]}, {"team-a", "team-b"}),
    ({"allow": ["*"], "deny": ["team-b"]}, {"team-a"}),
    ({"allow": ["*"], "deny": []}, {"team-a", "team-b"}),
    ({"allow": ["team-a", "kube-system"], "deny": ["team-b"]}, {"team-a", "kube-system"}),
    ({"allow": ["*", "kube-public"]}, {"team-a", "team-b", "kube-public"}),
    ({"allow": ["kube-system"], "deny": ["kube-system"]}, set()),
], ids=["star", "star-with-deny", "star-with-empty-deny", "named-system-namespace", "star-plus-named",
        "deny-wins-over-named"])
def test_system_namespaces_are_admitted_only_by_name(namespaces: dict[str, Any], admitted: set[str]) -> None:
    assert {ns for ns, ok in allowed(namespaces).items() if ok} == admitted


def test_the_environment_override_of_deny_keeps_them_denied_too() -> None:
    policy = build_settings({"namespaces": {"allow": ["*"]}}, {"REACTOR_NAMESPACES__DENY": "[team-b]"}).policy
    assert not any(policy.namespace_allowed(ns) for ns in SYSTEM)


def test_a_kube_system_workload_is_not_touched_with_star_and_a_deny(tmp_path: Path) -> None:
    """Over the webhook, against the embedded cluster: the attack of issue 12 (`allow: ['*']` plus a deny)."""
    sim = SimCluster().start()
    try:
        seed(sim, [deployment_doc("kube-system", "dcgm"), *namespace_docs("team-a"), deployment_doc("team-a", "web")])
        token = tmp_path / "token"
        token.write_text("system-namespaces-token\n")
        reactor = build_reactor(sim, make_settings(token, namespaces={"allow": ["*"], "deny": ["team-b"]}))
        system_pod, team_pod = pods_of(sim, "kube-system", "dcgm")[0], pods_of(sim, "team-a", "web")[0]
        body = notification([AlertSpec("GPUIdle", "kube-system", system_pod, "main", 0.0, 4),
                             AlertSpec("GPUIdle", "team-a", team_pod, "main", 0.0, 4)])
        answer = reactor.post(body, token="system-namespaces-token").get_json()
        by_namespace = {o["namespace"]: o for o in answer["outcomes"]}
        assert by_namespace["kube-system"]["reason"] == "namespace-not-allowed"
        assert by_namespace["team-a"]["result"] == "applied"  # the control: '*' does admit team-a
        assert state(sim, "deployments", "kube-system", "dcgm").changes == 0
        reactor.service.kube.close()
    finally:
        sim.stop()
