"""`reactor demo`: the reactor acting on the embedded cluster, shown as a table.

The embedded cluster runs in this process; the reactor runs as a real `reactor serve` child
process (gunicorn, the official client over HTTP), and is fed notifications shaped like the
ones Alertmanager sends. Nothing here is special-cased for the demo inside the reactor.
"""

from __future__ import annotations

import json
import secrets
import signal
import socket
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from reactor.core.errors import UsageError
from reactor.tools.launcher import Child, LaunchError, start_serve
from reactor.tools.local_run import curl_command
from reactor.tools.payloads import AlertSpec, notification, rfc3339
from reactor.tools.seeds import demo_file
from reactor.tools.signals import Signalled, raising_on_stop_signals
from reactor_sim import SimCluster

NAMESPACE = "ml-workloads"
NOTEBOOKS = "kubeflow-user-example-com"  # a Kubeflow profile's namespace, for the notebook step
WORKLOADS = (("deployments", "llm-inference"), ("statefulsets", "trainer"), ("deployments", "embedder"),
             ("deployments", "chat"), ("deployments", "pretrain"))
COUNTERS = ("reactor_actions_total", "reactor_alerts_skipped_total", "reactor_workload_skips_total")


@dataclass(frozen=True)
class Step:
    title: str
    build: Callable[[Demo], dict[str, Any]]


class Demo:
    """The cluster, the reactor child process, and what the table needs."""

    def __init__(self, sim: SimCluster, url: str, token: str) -> None:
        self.sim, self.url, self.token = sim, url, token
        self.started = datetime.now(UTC)
        self.sent: dict[str, dict[str, Any]] = {}

    def pods(self, app: str) -> list[str]:
        pods = self.sim.list("pods", NAMESPACE, label_selector=f"app={app}")
        return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))

    def specs(self, name: str, app: str, container: str, value: float, gpus: int, **kw: Any) -> list[AlertSpec]:
        return [AlertSpec(name, NAMESPACE, pod, container, value, gpus, starts_at=self.started, **kw)
                for pod in self.pods(app)]

    def post(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"{self.url}/alerts", data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


def _steps() -> list[Step]:
    def remember(key: str, body: dict[str, Any], demo: Demo) -> dict[str, Any]:
        demo.sent[key] = body
        return body

    def resolved(body: dict[str, Any]) -> dict[str, Any]:
        """The notification Alertmanager sends when the same alerts resolve: labels unchanged."""
        end = rfc3339(datetime.now(UTC))
        alerts = [dict(a, status="resolved", endsAt=end) for a in body["alerts"]]
        return dict(body, status="resolved", alerts=alerts)

    return [
        Step("llm-inference sits idle", lambda d: remember("idle", notification(
            d.specs("GPUUnderutilized", "llm-inference", "server", 0.03, 4)), d)),
        Step("the same notification again (Alertmanager repeat / HA twin)", lambda d: d.sent["idle"]),
        Step("trainer is saturated on both pods", lambda d: notification(
            d.specs("GPUSaturated", "trainer", "trainer", 0.98, 1))),
        Step("embedder is saturated (HPA-managed, at its max-gpus)", lambda d: remember("embedder", notification(
            d.specs("GPUSaturated", "embedder", "embedder", 0.97, 1)), d)),
        Step("chat is saturated", lambda d: notification(d.specs("GPUSaturated", "chat", "chat", 0.96, 1))),
        Step("the trainer's exporter disappeared", lambda d: notification(
            d.specs("GPUMetricsMissing", "trainer", "trainer", 0.77, 2)[:1])),
        Step("an alert from a system namespace", lambda d: notification(
            [AlertSpec("GPUIdle", "kube-system", "nvidia-dcgm-exporter-abcde", "exporter", 0.0, 1)])),
        Step("embedder's saturation resolved (its pod was replaced meanwhile)", lambda d: resolved(d.sent["embedder"])),
        *_cpu_steps(),
        Step("a Kubeflow notebook sits idle (changed through the Notebook)", lambda d: notification(
            [AlertSpec("GPUUnderutilized", NOTEBOOKS, seed_notebook(d.sim), "notebook", 0.02, 2,
                       starts_at=d.started)])),
    ]


def _cpu_steps() -> list[Step]:
    """The CPU half: a trainer throttled by its CPU limit keeps its GPUs and gets CPU, in place."""
    def throttled(name: str, value: float) -> Callable[[Demo], dict[str, Any]]:
        return lambda d: notification(d.specs(name, "pretrain", "pretrain", value, 2,
                                              extra_annotations={"cpu_throttling": "0.600"}))

    return [
        Step("pretrain underused, its CPU throttled 60%", throttled("GPUUnderutilized", 0.18)),
        Step("pretrain starved by its CPU", throttled("GPUStarvedByCPU", 0.18)),
    ]


def seed_notebook(sim: SimCluster, name: str = "jupyter") -> str:
    """Play Kubeflow's notebook controller: the Notebook CRD, a 2-GPU Notebook in a user's profile namespace, and
    the StatefulSet it would create for it (controller reference with the Notebook's uid, its name, its template's
    labels). Returns the notebook's pod name."""
    sim.load_manifests(resources.files("reactor.tools.demo_data").joinpath("notebook-crd.yaml").read_text())
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NOTEBOOKS}})
    gpus = {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}
    pod_spec = {"containers": [{"name": "notebook", "image": "kubeflownotebookswg/jupyter-pytorch-cuda:v1.9.0",
                                "resources": gpus}]}
    sim.apply({"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": name, "namespace": NOTEBOOKS},
               "spec": {"template": {"spec": pod_spec}}})
    notebook = sim.get("notebooks", NOTEBOOKS, name)
    # kubeflow/notebooks v1.11.0 notebook_controller.go generateStatefulSet: named as the Notebook, no labels of its
    # own (only its pod template is labelled `statefulset` and `notebook-name`).
    labels = {"statefulset": name, "notebook-name": name}
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "name": name, "uid": notebook["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}
    sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": name, "namespace": NOTEBOOKS, "ownerReferences": [owner]},
               "spec": {"replicas": 1, "serviceName": "", "selector": {"matchLabels": {"statefulset": name}},
                        "template": {"metadata": {"labels": labels}, "spec": pod_spec}}})
    sim.settle()
    return f"{name}-0"


def run_demo(*, once: bool, port: int = 0) -> int:
    """0 when done; 128 + N when signal N (Ctrl-C, SIGTERM, SIGHUP) stopped it — the child is stopped either way."""
    if port:
        _check_free(port)
    try:
        with raising_on_stop_signals(), tempfile.TemporaryDirectory(prefix="gpu-reactor-demo-") as tmp:
            _run(once=once, port=port, tmp=Path(tmp))
    except Signalled as e:
        name = signal.Signals(e.signum).name
        print(f"\nreactor demo: stopped by {name}; its reactor serve was stopped too", file=sys.stderr)
        return e.exit_status
    return 0


def _check_free(port: int) -> None:
    """Said before anything starts, rather than as gunicorn's retries a few seconds later."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            raise UsageError(f"--port {port}", f"cannot listen on 127.0.0.1:{port}: {e.strerror}; "
                                               "pick another port, or 0 for any free one") from e


def _run(*, once: bool, port: int, tmp: Path) -> None:
    sim = SimCluster().start()
    try:
        sim.load_manifests(demo_file("cluster.yaml").read_text())
        sim.settle()
        token = secrets.token_hex(16)
        child = _start_reactor(sim, tmp, token, port)
        try:
            _show(Demo(sim, child.url, token), sim)
            if once:
                _print_counters(child.probe_url)
                return
            curl = curl_command(tmp / "token", child.url.removeprefix("http://"), demo_file("alerts-idle.json"))
            print(f"\nServing on {child.url} (reactor serve, pid {child.pid}; probes and metrics on {child.probe_url}; "
                  f"embedded cluster at {sim.url}).\nWebhook token: {tmp / 'token'} (removed when the demo stops); "
                  f"try:\n  {curl}\nCtrl-C to stop.", flush=True)
            sim.run_controllers()
            child.popen.wait()
        finally:
            child.stop()
    finally:
        sim.stop()


def _start_reactor(sim: SimCluster, tmp: Path, token: str, port: int) -> Child:
    (tmp / "token").write_text(token)
    kubeconfig = sim.write_kubeconfig(str(tmp / "kubeconfig"))
    try:
        return start_serve(str(demo_file("policy.yaml")), token_file=tmp / "token", kubeconfig=kubeconfig, port=port)
    except LaunchError as e:
        raise SystemExit(f"reactor demo: {e}") from e


def _show(demo: Demo, sim: SimCluster) -> None:
    print(f"GPU Reactor demo — embedded cluster {sim.url}, reactor {demo.url}\n")
    _print_workloads(sim, "Before")
    rows: list[tuple[str, ...]] = []
    for n, step in enumerate(_steps(), 1):
        code, answer = demo.post(step.build(demo))
        outcomes = answer.get("outcomes", [])
        summaries = sorted({(o["alert"], o["status"], o.get("workload") or f"{o['namespace']}/{o['pod']}",
                             _summary(o)) for o in outcomes})
        for alert, status, workload, summary in summaries or [("-", "-", "-", f"HTTP {code}: {answer.get('error')}")]:
            rows.append((str(n), step.title, f"{alert} ({status})", workload.removeprefix("ml-workloads/"), summary))
        sim.settle()
    _table(("#", "step", "alert", "workload", "outcome"), rows)
    _print_workloads(sim, "After")


def _print_counters(url: str) -> None:
    """The action and skip counters, read while the reactor still runs (--once stops it right after)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    lines = [line for line in text.splitlines() if line.startswith(COUNTERS) and not line.endswith(" 0.0")]
    print("\nMetrics (non-zero), read from the reactor's /metrics before it stopped:")
    for line in lines:
        print(f"  {line}")


def _summary(o: dict[str, Any]) -> str:
    if o["result"] in ("applied", "recommended"):
        target = f"{o['container']} " if o.get("container") else ""
        return f"{o['result']}: {o['action']} {target}{o['from']} → {o['to']}"
    return f"{o['result']}: {o.get('reason')}"


def _print_workloads(sim: SimCluster, title: str) -> None:
    rows: list[tuple[str, ...]] = []
    for resource, name in WORKLOADS:
        obj = sim.get(resource, NAMESPACE, name)
        spec = obj["spec"]["template"]["spec"]
        gpus = ", ".join(f"{c['name']}={_gpus(c)}" for c in spec["containers"])
        replicas = str(obj["spec"].get("replicas", 1))
        rows.append((f"{obj['kind']}/{name}", replicas, gpus, spec.get("priorityClassName", "")))
    quota = sim.get("resourcequotas", NAMESPACE, "gpu-quota").get("status", {})
    used = quota.get("used", {}).get("requests.nvidia.com/gpu")
    hard = quota.get("hard", {}).get("requests.nvidia.com/gpu")
    print(f"{title}: (quota requests.nvidia.com/gpu used {used} of {hard})")
    _table(("workload", "replicas", "GPUs per pod", "priority class"), rows)
    print()


def _gpus(container: dict[str, Any]) -> str:
    return str(container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", "0"))


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*header))
    print(line.format(*("-" * w for w in widths)))
    for row in rows:
        print(line.format(*row))
