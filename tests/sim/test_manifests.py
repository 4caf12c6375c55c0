"""Loading manifests the way `kubectl apply -f/-k` finds them, CustomResourceDefinitions, and `reactor sim`."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from reactor_sim import SimCluster

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, shortNames: [smon],
          categories: [prometheus-operator]}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object,
     properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}}
"""


def test_a_folder_is_walked_for_objects_skipping_other_yaml(sim: SimCluster, tmp_path: Path) -> None:
    """A folder without a kustomization: every YAML file of Kubernetes objects, in subfolders too; YAML that is
    no object (an Alertmanager config) is skipped."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ml}\n")
    (tmp_path / "sub" / "b.yml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: ml}\n")
    (tmp_path / "alertmanager.yaml").write_text("route: {receiver: x}\nreceivers: [{name: x}]\n")
    (tmp_path / "notes.txt").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    loaded = sim.load_manifests(tmp_path)
    assert sorted(o["metadata"]["name"] for o in loaded) == ["a", "b"]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: cannot render a kustomization")
def test_a_kustomize_entry_point_is_rendered(sim: SimCluster, tmp_path: Path) -> None:
    """A folder with kustomization.yaml is what `kubectl apply -k` applies: its `namespace:` reaches the objects."""
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    (tmp_path / "kustomization.yaml").write_text("namespace: ml\nresources: [cm.yaml]\n")
    (loaded,) = sim.load_manifests(str(tmp_path))
    assert loaded["metadata"]["namespace"] == "ml"


def test_a_custom_resource_definition_serves_its_resource(sim: SimCluster) -> None:
    """A CRD registers its kind under its plural, scope and short names: objects of it are served at
    /apis/GROUP/VERSION/namespaces/NS/PLURAL, listed in discovery, and applied after the CRD."""
    sim.load_manifests("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\n"
                       "metadata: {name: gpu-reactor, namespace: ml}\nspec: {endpoints: [{port: http}]}\n---" + CRD)
    with urllib.request.urlopen(f"{sim.url}/apis/monitoring.coreos.com/v1/namespaces/ml/servicemonitors") as r:
        listed = json.loads(r.read())
    assert listed["kind"] == "ServiceMonitorList"
    assert [i["spec"] for i in listed["items"]] == [{"endpoints": [{"port": "http"}]}]
    with urllib.request.urlopen(f"{sim.url}/apis/monitoring.coreos.com/v1") as r:
        (entry,) = json.loads(r.read())["resources"]
    assert (entry["name"], entry["namespaced"], entry["shortNames"]) == ("servicemonitors", True, ["smon"])


def test_reactor_sim_serves_the_seeds_and_prints_the_kubeconfig(tmp_path: Path) -> None:
    """`reactor sim --seed FILE` applies the seeds, settles, prints the kubeconfig path, serves until SIGTERM."""
    kubeconfig = tmp_path / "sim.kubeconfig"
    command = [sys.executable, "-m", "reactor", "sim", "--seed", str(ROOT / "tests/fixtures/cluster.yaml"),
               "--port", "0", "--kubeconfig", str(kubeconfig)]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline() for _ in range(3)]
            assert lines[0].startswith("read 20 objects from "), lines
            assert lines[2].startswith(f"kubeconfig: {kubeconfig.resolve()}")
            url = lines[1].split()[-1]
            with urllib.request.urlopen(f"{url}/apis/apps/v1/namespaces/ml-workloads/deployments/llm-inference") as r:
                assert json.loads(r.read())["status"]["readyReplicas"] == 3
            if KUBECTL:
                done = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), "get", "sts", "-n", "ml-workloads"],
                                      capture_output=True, text=True, timeout=20)
                assert done.returncode == 0 and "trainer" in done.stdout, done.stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err


def test_reactor_sim_refuses_a_broken_seed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("metadata: {name: x}\n")
    done = subprocess.run([sys.executable, "-m", "reactor", "sim", "--seed", str(bad), "--port", "0",
                           "--kubeconfig", str(tmp_path / "k")], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "--seed " in done.stderr and "cannot read the manifests: not a Kubernetes object" in done.stderr


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: cannot render the kustomizations under deploy/")
def test_seeding_the_whole_deploy_folder(sim: SimCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """`reactor sim --seed deploy`: each kustomize entry point directly under deploy/ is rendered, plain YAML
    files are read, non-objects skipped; all is applied at once, and a namespace the seeds use without
    defining (`monitoring`, kube-prometheus-stack's) is created with a note."""
    from reactor.tools.sim_command import seed

    loaded = seed(sim, [str(ROOT / "deploy")])
    kinds = {o["kind"] for o in loaded}
    assert {"ClusterRole", "RoleBinding", "ResourceQuota", "CronJob", "PrometheusRule", "NetworkPolicy"} <= kinds
    assert "creating namespace monitoring" in capsys.readouterr().out
    running = {p["metadata"]["namespace"] for p in sim.list("pods") if p["status"]["phase"] == "Running"}
    assert running == {"gpu-reactor", "ml-workloads"}
