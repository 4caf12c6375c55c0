"""`reactor report --kubeconfig`: pods Prometheus has no kube-state-metrics owner series for are grouped by their
ownerReferences, read from the embedded cluster over real HTTP through the reactor's own resolver (ReplicaSet →
Deployment, Job → CronJob), read only; a pod the cluster no longer knows falls back to its name, and each workload
says which grouping it got."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reactor.app.cli import main
from reactor.tools.launcher import free_port
from reactor_sim import SimCluster
from tests.report import history
from tests.report.conftest import serve_history
from tests.report.history import END

NAMESPACE = "batch"  # no kube-state-metrics series there (history.py writes them for `ml` only)
SEEDS = f"""apiVersion: v1
kind: Node
metadata: {{name: node-a, labels: {{kubernetes.io/hostname: node-a}}}}
status:
  capacity: {{cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}}
  allocatable: {{cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}}
  conditions: [{{type: Ready, status: "True", reason: KubeletReady, message: ready}}]
---
apiVersion: v1
kind: Namespace
metadata: {{name: {NAMESPACE}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: infer, namespace: {NAMESPACE}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: infer}}}}
  template:
    metadata: {{labels: {{app: infer}}}}
    spec:
      containers:
      - {{name: main, image: registry.example.com/infer:1, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {{name: nightly, namespace: {NAMESPACE}}}
spec:
  schedule: "0 2 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - {{name: main, image: registry.example.com/train:1, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}
"""
GONE = "gone-7d9f8c6b5d-x2k4q"  # in the history only: its pod and ReplicaSet were deleted since


@dataclass(frozen=True)
class Served:
    sim: SimCluster
    url: str
    kubeconfig: str
    pods: dict[str, str]  # workload -> the pod name the cluster gave it


@contextlib.contextmanager
def _served(sim: SimCluster, work: Path, manifests: str, token: Callable[[], str | None]) -> Iterator[Served]:
    """`manifests` in `sim`, the CronJob run once, and the history of its pods, the Deployment's and GONE's served by
    Prometheus; the kubeconfig holds `token()` (None: the cluster's own credentials)."""
    sim.load_manifests(manifests)
    sim.settle()
    assert sim.trigger_cronjob(NAMESPACE, "nightly") is not None
    sim.settle()
    names = {p["metadata"]["name"] for p in sim.list("pods", NAMESPACE)}
    pods = {"infer": next(n for n in names if n.startswith("infer-")),
            "nightly": next(n for n in names if n.startswith("nightly-"))}
    shape = history.Shape("batch", 1, lambda t: 0.5, namespace=NAMESPACE)
    text = history.openmetrics([history.Pod(shape, name, "", "node-a") for name in (*pods.values(), GONE)])
    with serve_history(work, text) as url:
        yield Served(sim, url, sim.write_kubeconfig(work / "kubeconfig", token=token()), pods)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with SimCluster().start() as sim, _served(sim, tmp_path_factory.mktemp("report-kubeconfig"), SEEDS,
                                              lambda: None) as found:
        yield found


def _report(served: Served, tmp_path: Path, *extra: str) -> dict[str, tuple[str, str, str]]:
    out = tmp_path / "report.json"
    assert main(["report", "--prometheus-url", served.url, "--namespace", NAMESPACE, "--since", "4h",
                 "--until", END.isoformat(), "--step", "1m", "--output", "json", "--out", str(out), *extra]) == 0
    document = json.loads(out.read_text(encoding="utf-8"))
    return {pod: (w["kind"], w["name"], w["groupedBy"]) for w in document["workloads"] for pod in w["pods"]}


def test_ownerreferences_group_what_the_names_cannot(served: Served, tmp_path: Path) -> None:
    served.sim.reset_counters()
    grouped = _report(served, tmp_path, "--kubeconfig", served.kubeconfig)
    assert grouped == {
        served.pods["infer"]: ("Deployment", "infer", "kubeconfig"),  # Pod → ReplicaSet → Deployment
        served.pods["nightly"]: ("CronJob", "nightly", "kubeconfig"),  # Pod → Job → CronJob
        GONE: ("Deployment", "gone", "pod-name"),  # the cluster has neither it nor its ReplicaSet: the name's guess
    }
    verbs = {verb for verb, _, _ in served.sim.requests}
    assert verbs and verbs <= {"get", "list"}, served.sim.requests  # read only


def test_without_a_kubeconfig_a_job_pod_is_only_a_pod(served: Served, tmp_path: Path) -> None:
    grouped = _report(served, tmp_path)
    assert grouped[served.pods["nightly"]] == ("Pod", served.pods["nightly"], "pod-name")
    assert grouped[served.pods["infer"]] == ("Deployment", "infer", "pod-name")


def test_a_missing_kubeconfig_is_a_usage_error(served: Served, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--prometheus-url", served.url, "--kubeconfig", str(tmp_path / "nope")]) == 2
    assert "--kubeconfig" in capsys.readouterr().err


def test_a_cluster_that_does_not_answer_fails_the_report(served: Served, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """No silent fallback to the name guess: the report asked for the cluster's word and did not get it."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(Path(served.kubeconfig).read_text(encoding="utf-8").replace(
        served.sim.url, f"http://127.0.0.1:{free_port()}"), encoding="utf-8")
    out = tmp_path / "report.json"
    assert main(["report", "--prometheus-url", served.url, "--namespace", NAMESPACE, "--since", "4h", "--until",
                 END.isoformat(), "--step", "1m", "--kubeconfig", str(kubeconfig), "--out", str(out)]) == 1
    assert "the cluster did not answer" in capsys.readouterr().err
    assert not out.exists()


READER = f"""apiVersion: v1
kind: ServiceAccount
metadata: {{name: report-reader, namespace: {NAMESPACE}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: report-reader, namespace: {NAMESPACE}}}
rules:
- {{apiGroups: [""], resources: [pods], verbs: [get, list]}}
- {{apiGroups: [apps], resources: [replicasets, deployments, statefulsets], verbs: [get, list]}}
- {{apiGroups: [batch], resources: [jobs, cronjobs], verbs: [get, list]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: report-reader, namespace: {NAMESPACE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: report-reader}}
subjects: [{{kind: ServiceAccount, name: report-reader, namespace: {NAMESPACE}}}]
"""


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The same cluster with RBAC on, and a kubeconfig holding a ServiceAccount's token that may only get and list
    pods, ReplicaSets, Jobs and the workloads' kinds in the namespace: what the report says it needs."""
    with SimCluster(rbac=True).start() as sim, _served(
            sim, tmp_path_factory.mktemp("report-read-only"), SEEDS + "---\n" + READER,
            lambda: sim.service_account_token(NAMESPACE, "report-reader")) as found:
        yield found


def test_a_read_only_service_account_is_enough(read_only: Served, tmp_path: Path) -> None:
    grouped = _report(read_only, tmp_path, "--kubeconfig", read_only.kubeconfig)
    assert grouped == {read_only.pods["infer"]: ("Deployment", "infer", "kubeconfig"),
                       read_only.pods["nightly"]: ("CronJob", "nightly", "kubeconfig"),
                       GONE: ("Deployment", "gone", "pod-name")}


def test_a_read_the_account_may_not_make_fails_the_report_naming_it(read_only: Served, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Without `list` on pods the grouping cannot be the cluster's: the report fails, saying what was refused,
    rather than fall back to names in silence."""
    role = read_only.sim.get("roles", NAMESPACE, "report-reader")
    kept = role["rules"]
    role["rules"] = [r for r in kept if r["resources"] != ["pods"]]
    read_only.sim.apply(role)
    try:
        out = tmp_path / "report.json"
        assert main(["report", "--prometheus-url", read_only.url, "--namespace", NAMESPACE, "--since", "4h",
                     "--until", END.isoformat(), "--step", "1m", "--kubeconfig", read_only.kubeconfig,
                     "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert "pods" in err and ("forbidden" in err.lower() or "403" in err), err
        assert not out.exists()
    finally:
        role["rules"] = kept
        read_only.sim.apply(role)
