"""The reliability harness: real `reactor serve` child processes, clusters to seed, and what to count.

A child is started as `reactor demo` starts it (`python -m reactor serve`, gunicorn, the official
client over HTTP to the embedded cluster), in its own process group so a test can SIGKILL the
whole of it (arbiter and worker) like a node losing the pod. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL
from reactor.tools.launcher import LaunchError, start_serve
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor_sim import SimCluster

GPU = "nvidia.com/gpu"
TOKEN = "reliability-token-5f0c2a7e9d41b863"
WRITE_VERBS = ("patch", "create", "update", "delete", "deletecollection")
READY_TIMEOUT = 30.0


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    seconds: float

    @property
    def outcomes(self) -> list[dict[str, Any]]:
        return list(self.body.get("outcomes") or [])

    def reasons(self) -> set[tuple[str, str | None]]:
        return {(o["result"], o.get("reason")) for o in self.outcomes}


@dataclass
class Child:
    """One `reactor serve` process against `sim`; `start()` waits until /readyz answers 200 on its probe port."""

    sim: SimCluster
    workdir: Path
    policy: dict[str, Any] = field(default_factory=dict)
    name: str = "reactor"
    token: str = TOKEN
    # What the confirm step asks: the scenarios post genuine alerts, so the stand-in is told the rules fire what is
    # posted (post_raw). Kept across restarts of this child; none when the policy sets `confirm` itself.
    prometheus: PrometheusStandIn | None = None
    tls: tuple[Path, Path] | None = None
    kube_url: str | None = None  # a proxy in front of the cluster, if any
    port: int = 0
    probe_port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def start(self) -> Child:
        self.workdir.mkdir(parents=True, exist_ok=True)
        token_file = self.workdir / f"{self.name}.token"
        if not token_file.exists():
            token_file.write_text(self.token + "\n")
        kubeconfig = self.workdir / f"{self.name}.kubeconfig"
        if self.kube_url:
            from reactor_sim import kubeconfig as sim_kubeconfig
            sim_kubeconfig.write(kubeconfig, self.kube_url, None)
        else:
            self.sim.write_kubeconfig(kubeconfig)
        doc = {"logging": {"format": "text", "level": "WARNING"}, **self.policy}
        # `kube.watchCache` is on by default; these scenarios inject faults on the reads a notification makes and
        # count them, so they read with it off unless a scenario asks for it (as tests/support.py does).
        doc["kube"] = {"watchCache": False, **(doc.get("kube") or {})}
        if "confirm" not in doc:
            if self.prometheus is None:
                self.prometheus = PrometheusStandIn().start()
            doc["confirm"] = {"prometheusUrl": self.prometheus.url}
        config = self.workdir / f"{self.name}.policy.json"
        config.write_text(json.dumps(doc))  # JSON is YAML
        tls = (str(self.tls[0]), str(self.tls[1])) if self.tls else None
        try:
            child = start_serve(config, token_file=token_file, kubeconfig=kubeconfig, port=self.port,
                                probe_port=self.probe_port, log=self.log_path, tls=tls, timeout=READY_TIMEOUT)
        except LaunchError as e:
            raise AssertionError(f"{self.name}: {e}") from e
        self.port, self.probe_port, self.proc = child.port, child.probe_port, child.popen
        return self

    # --- HTTP ---------------------------------------------------------------------------

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.tls:
            context = ssl.create_default_context(cafile=str(self.tls[0]))
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def get(self, path: str, timeout: float = 10) -> tuple[int, bytes]:
        return _get(self.connection(timeout), path)

    def post_raw(self, data: bytes, headers: Mapping[str, str], timeout: float = 30) -> Answer:
        """POST /alerts; raises OSError / HTTPException when no answer comes (reset, timeout)."""
        if self.prometheus is not None:
            with contextlib.suppress(ValueError):
                sent = json.loads(data)
                if isinstance(sent, dict):
                    self.prometheus.observe(sent)
        conn = self.connection(timeout)
        started = time.perf_counter()
        try:
            conn.request("POST", "/alerts", body=data, headers=dict(headers))
            r = conn.getresponse()
            raw = r.read()
        finally:
            conn.close()
        seconds = time.perf_counter() - started
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"raw": raw[:200].decode("latin-1")}
        return Answer(r.status, body if isinstance(body, dict) else {"raw": body}, seconds)

    def post(self, body: Any, *, token: str | None = None, timeout: float = 30) -> Answer:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token or self.token}"}
        return self.post_raw(json.dumps(body).encode(), headers, timeout)

    def probe(self, path: str, timeout: float = 10) -> tuple[int, bytes]:
        """GET `path` on the probe listener (plain HTTP, its own port): /healthz, /readyz, /metrics."""
        return _get(http.client.HTTPConnection("127.0.0.1", self.probe_port, timeout=timeout), path)

    def metrics(self) -> str:
        status, raw = self.probe("/metrics")
        assert status == 200
        return raw.decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        total = 0.0
        for line in self.metrics().splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            series, _, value = line.rpartition(" ")
            metric, _, rest = series.partition("{")
            if metric != name:
                continue
            found = dict(part.split("=", 1) for part in _label_parts(rest.rstrip("}")))
            if all(found.get(k) == json.dumps(v) for k, v in labels.items()):
                total += float(value)
        return total

    # --- process ------------------------------------------------------------------------

    def pids(self) -> list[int]:
        """The arbiter and its workers."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        pids = [self.proc.pid]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rpartition(")")[2].split()[1]) == self.proc.pid:
                    pids.append(int(entry.name))
        return pids

    def rss_mib(self) -> float:
        """Resident memory of the arbiter and its workers together, from /proc/PID/status."""
        total_kib = 0
        for pid in self.pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
        return total_kib / 1024

    def kill(self) -> None:
        """SIGKILL the whole process group: no graceful shutdown, no goodbye."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        _reap_group(self.proc.pid)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _reap_group(pgid: int) -> None:
    """Make sure no worker of a killed arbiter outlives it (bounded wait; zombies await init, not us)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _live_members(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _live_members(pgid: int) -> list[int]:
    live = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(entry.name))
    return live


def _label_parts(text: str) -> list[str]:
    parts, depth, current = [], False, ""
    for ch in text:
        if ch == '"':
            depth = not depth
        if ch == "," and not depth:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current:
        parts.append(current)
    return parts


# --- clusters -------------------------------------------------------------------------------


def namespace_docs(ns: str, *, quota: int = 1000, max_gpus: int = 8) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": ns},
         "spec": {"hard": {f"requests.{GPU}": str(quota)}}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "gpu-limits", "namespace": ns},
         "spec": {"limits": [{"type": "Container", "min": {GPU: "1"}, "max": {GPU: str(max_gpus)},
                              "default": {GPU: "1"}, "defaultRequest": {GPU: "1"}}]}},
    ]


def deployment_doc(ns: str, name: str, *, replicas: int = 1, gpus: int = 4, container: str = "main",
                   annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}, "annotations": dict(annotations or {})},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
                     "name": container, "image": "registry.example.com/gpu-app:1.0",
                     "resources": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}}]}}},
    }


def statefulset_doc(ns: str, name: str, *, replicas: int = 1, gpus: int = 4, container: str = "main") -> dict[str, Any]:
    doc = deployment_doc(ns, name, replicas=replicas, gpus=gpus, container=container)
    doc["kind"] = "StatefulSet"
    doc["spec"]["serviceName"] = name
    return doc


NODES, NODE_GPUS = 64, 64  # big nodes: the scenarios' pods hold up to 48 GPUs, and surge beside them


def gpu_nodes() -> list[dict[str, Any]]:
    """Ready GPU nodes for every scenario (the embedded scheduler binds pods only to a Node that fits)."""
    room = {"cpu": "256", "memory": "2Ti", "pods": "110", GPU: str(NODE_GPUS)}
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-node-{i:02d}"},
             "status": {"capacity": room, "allocatable": dict(room),
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
            for i in range(NODES)]


def _get(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    """GET `path` on `conn`, closed after: the status and the body."""
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


@contextlib.contextmanager
def serving(name: str, folder: Path, policy: dict[str, Any],
          docs: Iterable[dict[str, Any]] | None = None) -> Iterator[tuple[SimCluster, Child]]:
    """A cluster (seeded with `docs`, when given) and one `reactor serve` child against it; both go at the end,
    the child's log tail printed first so that a failing module can be read."""
    sim = SimCluster().start()
    if docs is not None:
        seed(sim, docs)
    child = Child(sim, folder, policy=policy, name=name)
    try:
        child.start()
        yield sim, child
    finally:
        child.kill()
        print(f"--- {name} log (tail) ---\n{child.log_tail()}")
        sim.stop()


def seed(sim: SimCluster, docs: Iterable[dict[str, Any]]) -> None:
    """Apply the docs (and the GPU nodes, once per cluster) and settle."""
    nodes = [] if sim.list("nodes") else gpu_nodes()
    sim.apply(nodes + list(docs))
    sim.settle(max_rounds=1000)


def pods_of(sim: SimCluster, ns: str, app: str) -> list[str]:
    pods = sim.list("pods", ns, label_selector=f"app={app}")
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


def alerts_for(sim: SimCluster, ns: str, apps: Iterable[str], name: str = "GPUUnderutilized", *,
               container: str = "main", **kw: Any) -> list[AlertSpec]:
    return [AlertSpec(name, ns, pod, container, **kw) for app in apps for pod in pods_of(sim, ns, app)]


def body_of(specs: Iterable[AlertSpec]) -> dict[str, Any]:
    return notification(list(specs))


# --- what the cluster shows -----------------------------------------------------------------


@dataclass(frozen=True)
class State:
    generation: int
    gpus: str
    requests: str
    annotations: dict[str, str]

    @property
    def changes(self) -> int:
        """Spec changes since creation: one per applied template action."""
        return self.generation - 1

    @property
    def last_action(self) -> dict[str, Any] | None:
        raw = self.annotations.get(LAST_ACTION)
        return json.loads(raw) if raw else None


def state(sim: SimCluster, resource: str, ns: str, name: str, container: str = "main") -> State:
    obj = sim.get(resource, ns, name)
    spec = obj["spec"]["template"]["spec"]
    c = next(c for c in spec["containers"] if c["name"] == container)
    res = c.get("resources") or {}
    return State(int(obj["metadata"].get("generation", 1)), str((res.get("limits") or {}).get(GPU)),
                 str((res.get("requests") or {}).get(GPU)), dict(obj["metadata"].get("annotations") or {}))


def assert_whole(s: State, *, original: int, where: str) -> None:
    """Either the change and its record are both there, or neither is: never half-written."""
    assert s.gpus == s.requests, f"{where}: limit {s.gpus} != request {s.requests}"
    recorded = s.last_action
    changed = s.gpus != str(original)
    if changed:
        assert recorded is not None, f"{where}: GPUs changed to {s.gpus} with no last-action annotation"
        assert str(recorded["to"]) == s.gpus, f"{where}: annotation says {recorded['to']}, template has {s.gpus}"
        assert COOLDOWN_UNTIL in s.annotations and ORIGINAL in s.annotations, f"{where}: state annotations incomplete"
    else:
        assert recorded is None and COOLDOWN_UNTIL not in s.annotations, f"{where}: annotations without the change"
        assert s.changes == 0, f"{where}: spec changed ({s.changes}×) but GPUs did not"


def writes(sim: SimCluster) -> int:
    return sum(v for (verb, _, _), v in sim.requests.items() if verb in WRITE_VERBS)


def patches(sim: SimCluster, resource: str | None = None) -> int:
    return sum(v for (verb, res, _), v in sim.requests.items() if verb == "patch" and resource in (None, res))


def missing_outcomes(body: Mapping[str, Any], answer: Answer) -> int:
    """Alerts of `body` that a 200 answer does not account for, in order (0 for other answers)."""
    if answer.status != 200:
        return 0
    sent = [a["fingerprint"] for a in body["alerts"]]
    got = [o.get("fingerprint") for o in answer.outcomes]
    return sum(1 for i, fp in enumerate(sent) if i >= len(got) or got[i] != fp) + max(0, len(got) - len(sent))


def reactor_events(sim: SimCluster, ns: str, name: str, *, expect: int = 0, timeout: float = 10.0) -> int:
    """The reactor's Events on the workload. They are sent by a background thread after the answer: with `expect`,
    wait (up to `timeout`) for that many before counting; never waits past that many (a duplicate still shows)."""
    def count() -> int:
        return sum(1 for e in sim.list("events", ns) if e["involvedObject"]["name"] == name
                   and (e.get("source") or {}).get("component") == "gpu-reactor")

    deadline = time.monotonic() + timeout
    while expect and count() < expect and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1 if expect else 0)  # room for an Event sent twice to show
    return count()


class LossyProxy:
    """An HTTP proxy in front of the API server that loses the *answer* to the next N PATCHes.

    The PATCH reaches the API server and is applied; the client sees the connection close. The
    simulator's own `drop` fault closes before applying, so it cannot show this case.
    """

    def __init__(self, upstream: str, *, lose: int = 0) -> None:
        target = urlsplit(upstream)
        proxy = self
        self.lose = lose
        self.lost = 0
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                upstream_conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                try:
                    upstream_conn.request(self.command, self.path, body=body, headers=headers)
                    r = upstream_conn.getresponse()
                    data = r.read()
                finally:
                    upstream_conn.close()
                if self.command == "PATCH" and proxy._take():
                    self.close_connection = True  # applied upstream; the answer is lost
                    return
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def _take(self) -> bool:
        with self._lock:
            if self.lose > 0:
                self.lose -= 1
                self.lost += 1
                return True
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def deliver(child: Child, body: Mapping[str, Any], *, tries: int = 10, pause: float = 0.05,
            before_retry: Any = None) -> list[Answer]:
    """POST like Alertmanager: a 5xx or no answer is retried (bounded); returns every answer (None-free)."""
    answers: list[Answer] = []
    for attempt in range(tries):
        try:
            answer = child.post(body)
        except (OSError, http.client.HTTPException) as e:
            answer = Answer(0, {"error": f"{type(e).__name__}: {e}"}, 0.0)
        answers.append(answer)
        if 200 <= answer.status < 300 or 400 <= answer.status < 500:
            return answers
        if before_retry is not None:
            before_retry(attempt)
        time.sleep(pause)
    return answers
