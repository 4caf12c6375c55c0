"""What the API server can do, asked of it (reactor/cluster/capabilities.py), and what the act step makes of
its answers: a 404 from a subresource that is not served is never a pod gone, a resize that changed nothing is
never applied, the pre-1.33 `status.resize` is read."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reactor.act.resize import resize_pods
from reactor.app.assembly import assemble, check_capabilities
from reactor.cluster import compute
from reactor.cluster.kube import UNKNOWN, Capabilities, KubeGateway, NotFound
from reactor.config.settings import Kube
from reactor.core.errors import PermanentError, TemporaryError, UsageError
from reactor.core.metrics import Metrics
from reactor.core.model import Action, ComputeResources, Signal, Status, WorkloadRef
from reactor.tools.sim_command import kube_version_of
from reactor_sim import SimCluster
from tests.support import make_settings, with_prometheus

CORE = {"resources": [{"name": "pods"}, {"name": "pods/status"}, {"name": "pods/resize"}]}


def test_from_discovery_reads_the_version_and_the_subresources() -> None:
    found = Capabilities.from_discovery({"major": "1", "minor": "33+", "gitVersion": "v1.33.2-eks-1"}, CORE)
    assert (found.version, found.minor, found.in_place_resize, found.sidecars) == ("v1.33.2-eks-1", 33, True, True)
    assert found.in_place_refusal() is None


def test_the_version_alone_never_says_pods_resize_is_served() -> None:
    """A 1.33 server with InPlacePodVerticalScaling turned off lists no pods/resize: refused, whatever the number."""
    found = Capabilities.from_discovery({"major": "1", "minor": "33", "gitVersion": "v1.33.0"},
                                        {"resources": [{"name": "pods"}]})
    assert not found.in_place_resize
    assert "(v1.33.0) serves no pods/resize" in (found.in_place_refusal() or "")


def test_unanswered_discovery_takes_nothing_as_served() -> None:
    assert not (UNKNOWN.in_place_resize or UNKNOWN.sidecars or UNKNOWN.scoped_quotas)
    assert UNKNOWN.version == "unknown" and "not answered" in (UNKNOWN.in_place_refusal() or "")


def test_the_gateway_asks_again_after_a_reconnect() -> None:
    with SimCluster(kube_version="1.35").start() as sim:
        kube = KubeGateway.for_url(sim.url, Kube(qps=1000, burst=1000), Metrics(CollectorRegistry()))
        try:
            assert kube.capabilities().in_place_resize
            assert kube.capabilities() is kube.capabilities(), "remembered: one discovery"
            assert sim.requests[("get", "/version/", "")] == 1
            sim.inject_fault(verb="list", resource="pods", mode="drop", count=10)
            with pytest.raises(TemporaryError):
                kube.list_objects("Pod", "default")  # the connection breaks: the server met next may be another
            assert kube.capabilities().in_place_resize
            assert sim.requests[("get", "/version/", "")] == 2, "asked again after the reconnect"
        finally:
            kube.close()


def test_serve_asks_at_start_and_says_why_in_place_will_be_refused(tmp_path: Any) -> None:
    (tmp_path / "token").write_text("t" * 32)
    with SimCluster(kube_version="1.28").start() as sim:
        settings, _ = with_prometheus(make_settings(tmp_path / "token"))  # what the confirm step would ask
        kube = KubeGateway.for_url(sim.url, settings.kube, Metrics(CollectorRegistry()))
        service = assemble(settings, kube=kube, metrics=Metrics(CollectorRegistry()))
        assert "(v1.28.0) serves no pods/resize" in (check_capabilities(service) or "")
        kube.close()


def test_sim_refuses_a_release_it_does_not_model() -> None:
    with pytest.raises(UsageError, match="not modelled: choose one of 1.28, 1.32, 1.33, 1.35"):
        kube_version_of("1.31")
    assert kube_version_of(None).minor == 35


# -- the act step's in-place writes ---------------------------------------------------------------------------

REF = WorkloadRef("Deployment", "ml", "trainer")
ACTION = Action(action="resize-cpu", direction="up", workload=REF, container="main", from_value="2000m",
                to_value="3000m", strategy="resize-cpu-up", cpu=ComputeResources(request=3000, limit=3000))


def _pod(cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "main", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}, "status": {}}


class _Kube:
    """A gateway whose pods/resize answers as told: `answer` (a pod), or NotFound; `present`: the pods a GET finds."""

    def __init__(self, answer: dict[str, Any] | None, present: set[str]) -> None:
        self.answer, self.present, self.forgot = answer, present, False

    def resize_pod(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.answer is None:
            raise NotFound("patch pods/resize: 404 NotFound: the server could not find the requested resource")
        return self.answer

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        if name not in self.present:
            raise NotFound(f'pods "{name}" not found')
        return self.answer or _pod("2")

    def forget_capabilities(self) -> None:
        self.forgot = True


def _signal(*pods: str) -> Signal:
    return Signal(alert="GPUStarvedByCPU", status=Status.FIRING, keys=(), container="main", value=None, pods=pods)


def test_a_404_for_a_pod_that_is_there_is_the_unserved_subresource() -> None:
    kube = _Kube(None, {"a"})
    with pytest.raises(PermanentError, match="pod a: the API server serves no pods/resize") as info:
        resize_pods(kube, ACTION, _signal("a"))  # type: ignore[arg-type]
    assert "gone" not in str(info.value) and kube.forgot


def test_a_resize_that_changed_no_pod_is_not_applied() -> None:
    with pytest.raises(PermanentError, match="in-place resize changed no pod: a: gone; b: gone"):
        resize_pods(_Kube(None, set()), ACTION, _signal("a", "b"))  # type: ignore[arg-type]
    with pytest.raises(PermanentError, match="changed no pod: a: unchanged"):
        resize_pods(_Kube(_pod("2"), {"a"}), ACTION, _signal("a"))  # type: ignore[arg-type]
    # with the template written too (`both`), the pods' report is said, and the change stands
    assert resize_pods(_Kube(None, set()), ACTION, _signal("a"), only=False) == ["a: gone"]  # type: ignore[arg-type]


def test_one_pod_resized_is_applied_and_a_gone_one_is_said() -> None:
    kube = _Kube(_pod("3"), {"a"})
    assert resize_pods(kube, ACTION, _signal("a", "b")) == ["a: done", "b: gone"]  # type: ignore[arg-type]


def test_the_pre_1_33_status_resize_is_read() -> None:
    """KEP-1287's v1.27 API: status.resize (Proposed, InProgress, Deferred, Infeasible); 1.33 made it conditions."""
    pod = _pod("3")
    pod["status"]["resize"] = "Deferred"
    assert compute.resize_status(pod) == "Deferred"
    pod["status"]["resize"] = "InProgress"
    assert compute.resize_progress([pod], None, "main", 3000).actuating


def test_carries_compares_the_values_sent() -> None:
    assert compute.carries(_pod("3"), "main", ComputeResources(request=3000, limit=3000))
    assert not compute.carries(_pod("2"), "main", ComputeResources(request=3000, limit=3000))
    assert compute.carries(_pod("3"), "main", ComputeResources(request=None, limit=3000))
    assert not compute.carries(_pod("3"), "other", ComputeResources(request=None, limit=3000))
