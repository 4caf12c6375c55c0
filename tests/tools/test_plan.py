"""`reactor plan` out of the box: the demo cluster and policy by default, examples whose pods exist there, JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reactor.app.cli import main
from reactor_sim import SimCluster

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "reactor" / "tools" / "demo_data"
EXAMPLES = sorted(DEMO.glob("alerts-*.json"))


def test_there_are_examples_for_the_main_alerts() -> None:
    names = {a["labels"]["alertname"] for f in EXAMPLES for a in json.loads(f.read_text())["alerts"]}
    assert names >= {"GPUUnderutilized", "GPUSaturated", "GPUIdle", "GPUMetricsMissing"}


def _demo_pods(*seeds: str) -> set[tuple[str, str]]:
    """The pods of the demo cluster as `reactor plan` seeds it: the files applied in one go, then settled."""
    with SimCluster().start() as sim:
        for seed in seeds:
            sim.load_manifests((DEMO / seed).read_text())
        sim.settle()
        return {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in sim.list("pods")}


def test_every_example_names_pods_of_the_demo_cluster() -> None:
    plain = _demo_pods("cluster.yaml")
    shared = _demo_pods("cluster.yaml", "rebalance.yaml")  # --example rebalance adds the demo's shared quota
    for example in EXAMPLES:
        named = {(a["labels"]["namespace"], a["labels"]["pod"]) for a in json.loads(example.read_text())["alerts"]}
        assert named and named <= (shared if example.name == "alerts-rebalance.json" else plain), example.name


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_plan_without_a_cluster_plans_each_example_on_the_demo(example: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    name = example.name.removeprefix("alerts-").removesuffix(".json")
    assert main(["plan", "--example", name, "--output", "json"]) == 0
    out, err = capsys.readouterr()
    outcomes = json.loads(out)["outcomes"]
    assert outcomes and all(o["workload"] and o.get("reason") != "not-found" for o in outcomes), outcomes
    assert all(o["result"] in ("recommended", "skipped") for o in outcomes)
    assert "note:" not in err


def test_the_json_output_is_the_webhook_answer_and_text_explains(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(DEMO / "alerts-underutilized.json")
    assert main(["plan", "--alerts", example, "--output", "json"]) == 0
    (outcome,) = json.loads(capsys.readouterr().out)["outcomes"]
    assert (outcome["result"], outcome["action"], outcome["container"], outcome["from"], outcome["to"]) == (
        "recommended", "resize-gpu", "server", 4, 1)
    assert outcome["considered"] == [{"strategy": "resize-gpu-down", "reason": None}]
    assert main(["plan", "--alerts", example]) == 0
    assert "would apply: resize-gpu server: 4 → 1" in capsys.readouterr().out


def test_a_pod_the_demo_does_not_have_gets_a_pointer_to_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    sample = ROOT / "tests" / "samples" / "am-0.25-underutilized-firing.json"
    assert main(["plan", "--alerts", str(sample)]) == 0
    out, err = capsys.readouterr()
    assert "skipped: not-found" in out
    assert "--example underutilized|idle|saturated|metrics-missing" in err and "--seed or --kubeconfig" in err


def test_every_example_is_shipped_and_named_alike_in_the_command_line() -> None:
    """`reactor plan --example NAME` works from an installed wheel: the files are package data, and the CLI's list
    (kept there so `reactor --help` imports no tool) is the tool's."""
    from reactor.app.cli import PLAN_EXAMPLES
    from reactor.tools.plan import EXAMPLES, example_path

    assert PLAN_EXAMPLES == EXAMPLES
    for name in EXAMPLES:
        assert json.loads(Path(example_path(name)).read_text())["alerts"], name


def test_the_sim_default_folder_is_named_alike_in_the_command_line() -> None:
    """`reactor sim` makes only its own default folder; the CLI's copy of the name (no tool import) is the tool's."""
    from reactor.app.cli import SIM_KUBECONFIG
    from reactor.tools.sim_command import DEFAULT_KUBECONFIG

    assert SIM_KUBECONFIG == DEFAULT_KUBECONFIG


REBALANCE_SEED = """\
apiVersion: v1
kind: Namespace
metadata: {name: ml-workloads}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu-quota, namespace: ml-workloads}
spec: {hard: {requests.nvidia.com/gpu: "8"}}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-node-1}
status:
  capacity: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
  allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
  conditions: [{type: Ready, status: "True", reason: KubeletReady}]
""" + "".join(f"""---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: {name}, namespace: ml-workloads, annotations: {annotations}}}
spec:
  replicas: 1
  serviceName: {name}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      priorityClassName: {cls}
      containers:
      - name: main
        image: {name}:1
        resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}, requests: {{nvidia.com/gpu: "{gpus}"}}}}
""" for name, cls, annotations, gpus in (("training", "medium-priority-gpu", '{"gpu-reactor.io/donor": "true"}', 4),
                                         ("inference", "high-priority-gpu", "{}", 2),
                                         ("notebook", "medium-priority-gpu", "{}", 2)))


def test_plan_explains_a_rebalance_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The donors' idle alerts come from the same --alerts file: the receiver's refusal, each candidate and why,
    the donor's change, then the receiver's."""
    from reactor.tools.payloads import AlertSpec, notification

    seed = tmp_path / "cluster.yaml"
    seed.write_text(REBALANCE_SEED + (ROOT / "deploy" / "base" / "priorityclasses.yaml").read_text().join(
        ["---\n", ""]))
    policy = tmp_path / "policy.yaml"
    policy.write_text("namespaces: {allow: [ml-workloads]}\n"
                      "rebalance: {enabled: true, alertmanagerUrl: 'http://alertmanager:9093'}\n")
    alerts = tmp_path / "alerts.json"
    alerts.write_text(json.dumps(notification([
        AlertSpec("GPUSaturated", "ml-workloads", "inference-0", "main", 0.97, 2),
        AlertSpec("GPUUnderutilized", "ml-workloads", "training-0", "main", 0.1, 4),
        AlertSpec("GPUUnderutilized", "ml-workloads", "notebook-0", "main", 0.1, 2)], group_by=("namespace",))))
    assert main(["plan", "--alerts", str(alerts), "--config", str(policy), "--seed", str(seed)]) == 0
    out = capsys.readouterr().out
    assert "skipped: quota-exceeded — resize-gpu-up: main 2→3 GPUs needs 1 GPUs of quota gpu-quota" in out
    assert ("rebalance plan: first StatefulSet/training: resize-gpu-down 4→1 frees 3 GPUs of quota gpu-quota; "
            "then this workload: resize-gpu-up once quota gpu-quota shows the room") in out
    assert "    donor StatefulSet/notebook: not opted in" in out
    assert "    donor StatefulSet/training: resize-gpu-down 4→1 frees 3 GPUs" in out
    assert "would apply: resize-gpu main: 4 → 1" in out  # the donor's own alert, planned as its own change


def test_plan_without_the_state_key_says_it_cannot_verify_and_never_to_remove(
        reactor: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A laptop never holds the reactor's key: the reactor's own signed records then read as unsigned. The plan
    says it cannot verify them and how to plan with the key; it never suggests removing them (that would erase
    the reactor's cooldowns and originals)."""
    shrink = reactor.alerts("GPUUnderutilized", "llm-inference", "server", value=0.2, gpus=4)
    assert reactor.post(shrink).get_json()["outcomes"][0]["result"] == "applied"  # the reactor's record is on it
    kubeconfig = reactor.sim.write_kubeconfig(tmp_path / "kubeconfig")
    alerts = tmp_path / "alerts.json"
    alerts.write_text(json.dumps(reactor.alerts("GPUSaturated", "llm-inference", "server", value=0.97, gpus=2)))
    policy = tmp_path / "policy.yaml"
    policy.write_text("namespaces: {allow: [ml-workloads]}\n")
    assert main(["plan", "--alerts", str(alerts), "--config", str(policy), "--kubeconfig", str(kubeconfig)]) == 0
    captured = capsys.readouterr()
    assert "unauthenticated-state" in captured.out
    assert "no state key was given" in captured.err and "state.keyFile" in captured.err, captured.err
    assert "do not remove those records" in captured.err
    assert "remove them" not in captured.out + captured.err


def test_the_rebalance_example_plans_a_donor_then_the_receiver(capsys: pytest.CaptureFixture[str]) -> None:
    """`reactor plan --example rebalance`: the demo's shared quota, rebalancing on, donors from the same file."""
    assert main(["plan", "--example", "rebalance"]) == 0
    out = capsys.readouterr().out
    assert "skipped: quota-exceeded — scale-replicas-up: replicas 2→3 needs 2 GPUs of quota gpu-quota" in out
    assert ("rebalance plan: first Deployment/training: scale-replicas-down 2→1 frees 2 GPUs of quota gpu-quota; "
            "then this workload: scale-replicas-up once quota gpu-quota shows the room") in out
