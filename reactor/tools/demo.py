"""`reactor demo`: the reactor acting on the embedded cluster, shown as a table.

The embedded cluster runs in this process; the reactor runs as a real `reactor serve` child
process (gunicorn, the official client over HTTP), and is fed notifications shaped like the
ones Alertmanager sends. Nothing here is special-cased for the demo inside the reactor.

The last step shows rebalancing (docs/rebalancing.md): the reactor asks Alertmanager's API v2 which donors are
idle now. A small server in this process (tools/alertmanager_api.py) stands in for Alertmanager there, as the
notifications already do for its webhook: it answers `GET /api/v2/alerts` with the alerts the demo says are firing,
in the gettableAlert shape Alertmanager 0.25 returns. The reactor child is pointed at it through the environment
(`rebalance.enabled`, `rebalance.alertmanagerUrl`), with a short `verify.interval` so that the receiver's growth,
retried by the reactor's rebalancer on that interval, does not keep the demo waiting.

The reactor confirms every alert against Prometheus's rule state before it writes (docs/confirm.md). A second
small server (tools/prometheus_api.py) stands in for Prometheus's API: the demo tells it that the rules fire what
it sends (its notifications stand for genuine ones), and the child is pointed at it (`confirm.prometheusUrl`).
"""

from __future__ import annotations

import json
import secrets
import signal
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from reactor.core.errors import UsageError
from reactor.tools.alertmanager_api import AlertmanagerStandIn
from reactor.tools.launcher import Child, LaunchError, start_serve
from reactor.tools.local_run import curl_command
from reactor.tools.payloads import AlertSpec, notification, rfc3339
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor.tools.seeds import demo_file
from reactor.tools.signals import Signalled, raising_on_stop_signals
from reactor_sim import SimCluster

NAMESPACE = "ml-workloads"
NOTEBOOKS = "kubeflow-user-example-com"  # a Kubeflow profile's namespace, for the notebook step
WORKLOADS = (("deployments", "llm-inference"), ("statefulsets", "trainer"), ("deployments", "embedder"),
             ("deployments", "chat"), ("deployments", "pretrain"))
SHARED = "ml-shared"  # the rebalance step's namespace: training and inference in one 8-GPU quota
COUNTERS = ("reactor_actions_total", "reactor_alerts_skipped_total", "reactor_workload_skips_total",
            "reactor_rebalances_total", "reactor_rebalance_gpus_moved_total")
VERIFY_INTERVAL = "1s"  # the reactor child's verify.interval: its rebalancer retries a waiting growth this often
GROWTH_WAIT = 30.0  # seconds the rebalance step waits for the receiver's growth before it says it did not come
Row = tuple[str, str, str]  # alert, workload, outcome


@dataclass(frozen=True)
class Step:
    title: str
    build: Callable[[Demo], dict[str, Any]]
    # The step's own rows from the reactor's answer, once the cluster settled (default: one per outcome).
    rows: Callable[[Demo, dict[str, Any]], list[Row]] | None = None


class Demo:
    """The cluster, the reactor child process, the Alertmanager and Prometheus stand-ins, and what the table needs."""

    def __init__(self, sim: SimCluster, url: str, token: str, alertmanager: AlertmanagerStandIn | None = None,
                 prometheus: PrometheusStandIn | None = None) -> None:
        self.sim, self.url, self.token, self.alertmanager = sim, url, token, alertmanager
        self.prometheus = prometheus
        self.started = datetime.now(UTC)
        self.sent: dict[str, dict[str, Any]] = {}

    def pods(self, app: str, namespace: str = NAMESPACE) -> list[str]:
        pods = self.sim.list("pods", namespace, label_selector=f"app={app}")
        return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))

    def specs(self, name: str, app: str, container: str, value: float, gpus: int, namespace: str = NAMESPACE,
              **kw: Any) -> list[AlertSpec]:
        return [AlertSpec(name, namespace, pod, container, value, gpus, starts_at=self.started, **kw)
                for pod in self.pods(app, namespace)]

    def idle(self, specs: list[AlertSpec]) -> None:
        """The idle alerts the rules fire now, in both stand-ins (Alertmanager holds what Prometheus sends it)."""
        if self.alertmanager is not None:
            self.alertmanager.fire(specs)
        if self.prometheus is not None:
            self.prometheus.forget({s.name for s in specs})
            self.prometheus.fire(specs)

    def post(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.prometheus is not None:  # the demo's notifications are genuine: the rules fire what they carry
            self.prometheus.observe(body)
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
        Step("inference saturated in a full 8-GPU quota; training idle", _saturate_the_shared_quota, _rebalanced),
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


def seed_shared_quota(sim: SimCluster) -> None:
    """The rebalance step's seed (demo_data/rebalance.yaml): training (opted in as donor) and inference holding
    all 8 GPUs of one quota, with a third node for their pods."""
    sim.load_manifests(demo_file("rebalance.yaml").read_text())
    sim.settle()


def quota_usage(sim: SimCluster, namespace: str) -> tuple[int, int]:
    """(used, hard) GPUs of the namespace's `gpu-quota`, as the API server's quota status shows them."""
    status = sim.get("resourcequotas", namespace, "gpu-quota").get("status", {})
    key = "requests.nvidia.com/gpu"
    return int(status.get("used", {}).get(key, "0")), int(status.get("hard", {}).get(key, "0"))


def _idle_training(demo: Demo) -> list[AlertSpec]:
    """training's GPUIdle alerts, one per pod, as Prometheus sends them to Alertmanager."""
    return demo.specs("GPUIdle", "training", "training", 0.03, 2, namespace=SHARED)


def _saturate_the_shared_quota(demo: Demo) -> dict[str, Any]:
    """Alertmanager holds training's idle alerts (firing, not yet sent to the reactor: its route's group_interval
    has not come round); the notification is inference's saturation. The shared quota was seeded with the cluster
    (`_run`): seeded here, the reactor's watch cache could still miss the quota's `used` when the alert came, and
    decide on a quota that looked empty."""
    demo.idle(_idle_training(demo))
    demo.sent["shared-before"] = {"quota": quota_usage(demo.sim, SHARED), "training": _replicas(demo.sim, "training"),
                                  "inference": _replicas(demo.sim, "inference")}
    return notification(demo.specs("GPUSaturated", "inference", "server", 0.97, 2, namespace=SHARED))


def _rebalanced(demo: Demo, answer: dict[str, Any]) -> list[Row]:
    """Three rows, each with the quota as the API server shows it then: the receiver refused for quota, the donor's
    shrink (naming the receiver), and the receiver's growth once the reactor's rebalancer saw the room."""
    sim = demo.sim
    receiver = f"Deployment/{SHARED}/inference"
    donor = f"Deployment/{SHARED}/training"
    before = demo.sent["shared-before"]
    used, hard = before["quota"]
    outcomes = [o for o in answer.get("outcomes", []) if o.get("workload") == receiver]
    refused = _summary(outcomes[0]) if outcomes else f"no outcome: {answer.get('error') or answer}"
    rows: list[Row] = [("GPUSaturated (firing)", receiver, f"{refused} (quota {used}/{hard})")]
    demo.idle(_idle_training(demo))  # Prometheus no longer sees a deleted pod's series: its alert resolves
    gave = _rebalance_record(sim, "training")
    replicas = _replicas(sim, "training")
    used, hard = quota_usage(sim, SHARED)
    if gave is None or gave.get("role") != "donor":
        rows.append(("GPUIdle (in Alertmanager)", donor, f"not a donor (replicas {replicas}, quota {used}/{hard})"))
        return rows
    rows.append(("GPUIdle (in Alertmanager)", donor, f"donated: scale-replicas {before['training']} → {replicas}, "
                 f"{gave['gpus']} GPUs to {gave['kind']}/{gave['name']} (quota {used}/{hard})"))
    waited = _wait_for(lambda: _replicas(sim, "inference") > before["inference"], GROWTH_WAIT)
    sim.settle()
    got = _rebalance_record(sim, "inference")
    used, hard = quota_usage(sim, SHARED)
    grown = _replicas(sim, "inference")
    if waited is None or got is None:
        rows.append(("GPUSaturated (firing)", receiver, f"still waiting after {GROWTH_WAIT:g}s (replicas {grown}, "
                     f"quota {used}/{hard})"))
        return rows
    rows.append(("GPUSaturated (firing)", receiver, f"grown {waited:.1f}s later: scale-replicas "
                 f"{before['inference']} → {grown}, given by {got['kind']}/{got['name']} (quota {used}/{hard})"))
    return rows


def _replicas(sim: SimCluster, name: str) -> int:
    return int(sim.get("deployments", SHARED, name)["spec"]["replicas"])


def _rebalance_record(sim: SimCluster, name: str) -> dict[str, Any] | None:
    """The side of a rebalance the reactor recorded on the workload (its `gpu-reactor.io/rebalance` annotation)."""
    text = sim.get("deployments", SHARED, name)["metadata"].get("annotations", {}).get("gpu-reactor.io/rebalance")
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) and {"role", "kind", "name", "gpus"} <= record.keys() else None


def _wait_for(done: Callable[[], bool], timeout: float) -> float | None:
    """Seconds until `done()` held, or None if it did not within `timeout`."""
    start = time.monotonic()
    while not done():
        if time.monotonic() - start > timeout:
            return None
        time.sleep(0.1)
    return time.monotonic() - start


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
        seed_shared_quota(sim)  # the last step's namespace (step 12), seeded before the reactor starts
        token = secrets.token_hex(16)
        with AlertmanagerStandIn() as alertmanager, PrometheusStandIn() as prometheus:
            _serve(sim, alertmanager, prometheus, once=once, port=port, tmp=tmp, token=token)
    finally:
        sim.stop()


def _serve(sim: SimCluster, alertmanager: AlertmanagerStandIn, prometheus: PrometheusStandIn, *, once: bool,
           port: int, tmp: Path, token: str) -> None:
    child = start_reactor(sim, tmp, token, port, alertmanager.url, prometheus.url)
    try:
        _show(Demo(sim, child.url, token, alertmanager, prometheus), sim)
        if once:
            _print_counters(child.probe_url)
            return
        curl = curl_command(tmp / "token", child.url.removeprefix("http://"), demo_file("alerts-idle.json"))
        print(f"\nServing on {child.url} (reactor serve, pid {child.pid}; probes and metrics on {child.probe_url}; "
              f"embedded cluster at {sim.url}; Alertmanager stand-in at {alertmanager.url}; Prometheus stand-in at "
              f"{prometheus.url}, firing what the demo sent).\n"
              f"Webhook token: {tmp / 'token'} (removed when the demo stops); "
              f"try:\n  {curl}\nCtrl-C to stop.", flush=True)
        sim.run_controllers()
        child.popen.wait()
    finally:
        child.stop()


def start_reactor(sim: SimCluster, tmp: Path, token: str, port: int, alertmanager_url: str,
                  prometheus_url: str) -> Child:
    """`reactor serve` with the demo's policy, rebalancing on and asking the Alertmanager stand-in at
    `alertmanager_url`, confirming against the Prometheus stand-in at `prometheus_url` (settings from the
    environment: the URLs are known only now)."""
    (tmp / "token").write_text(token)
    kubeconfig = sim.write_kubeconfig(str(tmp / "kubeconfig"))
    env = {"REACTOR_REBALANCE__ENABLED": "true", "REACTOR_REBALANCE__ALERTMANAGER_URL": alertmanager_url,
           "REACTOR_VERIFY__INTERVAL": VERIFY_INTERVAL, "REACTOR_CONFIRM__PROMETHEUS_URL": prometheus_url}
    try:
        return start_serve(str(demo_file("policy.yaml")), token_file=tmp / "token", kubeconfig=kubeconfig, port=port,
                           env=env)
    except LaunchError as e:
        raise SystemExit(f"reactor demo: {e}") from e


def _show(demo: Demo, sim: SimCluster) -> None:
    print(f"GPU Reactor demo — embedded cluster {sim.url}, reactor {demo.url}\n")
    _print_workloads(sim, "Before")
    rows: list[tuple[str, ...]] = []
    for n, step in enumerate(_steps(), 1):
        for alert, workload, outcome in play(demo, step):
            rows.append((str(n), step.title, alert, workload, outcome))
    _table(("#", "step", "alert", "workload", "outcome"), rows)
    _print_workloads(sim, "After")


def play(demo: Demo, step: Step) -> list[Row]:
    """Send the step's notification, let the cluster settle, and say what came of it."""
    code, answer = demo.post(step.build(demo))
    demo.sim.settle()
    if step.rows is not None:
        return step.rows(demo, answer)
    outcomes = answer.get("outcomes", [])
    summaries = sorted({(o["alert"], o["status"], o.get("workload") or f"{o['namespace']}/{o['pod']}",
                         _summary(o)) for o in outcomes})
    return [(f"{alert} ({status})", workload.removeprefix("ml-workloads/"), summary)
            for alert, status, workload, summary in summaries] or [("-", "-", f"HTTP {code}: {answer.get('error')}")]


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
