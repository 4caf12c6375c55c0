"""The naive baseline: what a per-pod polling script does with the same storm.

For every pod: one Prometheus query for its GPU utilization, then one PATCH of the pod's GPU
resources. Pod resources are immutable, so the embedded cluster answers 422 — counted anyway:
the point is how many requests the approach costs, not whether it works. The Prometheus it asks
is `FakePrometheus`, a tiny local HTTP endpoint that answers every instant query with one sample.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

GPU = "nvidia.com/gpu"
QUERY = 'avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{{namespace="{ns}", pod="{pod}"}}) / 100'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as Prometheus (Go) does: no 40 ms delayed-ACK stalls
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        with self.server.lock:
            self.server.requests[url.path] += 1
        query = urllib.parse.parse_qs(url.query).get("query", [""])[0]
        result = [{"metric": {"query": query[:64]}, "value": [time.time(), str(self.server.value)]}]
        data = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, value: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.value = value
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()


class FakePrometheus:
    """`/api/v1/query` answering `value` for every query; counts what it was asked."""

    def __init__(self, value: float = 0.25) -> None:
        self._server = _Server(value)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakePrometheus:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> Counter[str]:
        return self._server.requests


@dataclass
class NaiveResult:
    pods: int
    queries: int = 0
    patches: Counter[int] = field(default_factory=Counter)
    lists: int = 0
    seconds: float = 0.0


def run_naive(api_url: str, prometheus_url: str, namespaces: Sequence[str], *, target: float = 0.6,
              container: str = "server", time_limit: float = 120.0) -> NaiveResult:
    """List each namespace's pods, then query and patch pod by pod, as a cron script would."""
    configuration = k8s.Configuration(host=api_url)
    configuration.retries = False
    api_client = k8s.ApiClient(configuration)
    core = k8s.CoreV1Api(api_client)
    result = NaiveResult(pods=0)
    started = time.perf_counter()
    deadline = time.monotonic() + time_limit
    try:
        for ns in namespaces:
            pods = core.list_namespaced_pod(ns).items
            result.lists += 1
            for pod in pods:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the naive baseline ran past {time_limit:.0f} s")
                result.pods += 1
                value = _utilization(prometheus_url, ns, pod.metadata.name)
                result.queries += 1
                gpus = int(pod.spec.containers[0].resources.limits.get(GPU, "0"))
                want = max(1, math.ceil(gpus * value / target))
                body = {"spec": {"containers": [{"name": container, "resources": {
                    "limits": {GPU: str(want)}, "requests": {GPU: str(want)}}}]}}
                try:
                    core.patch_namespaced_pod(pod.metadata.name, ns, body)
                    result.patches[200] += 1
                except ApiException as e:
                    result.patches[int(e.status or 0)] += 1
    finally:
        api_client.close()
        result.seconds = time.perf_counter() - started
    return result


def _utilization(prometheus_url: str, namespace: str, pod: str) -> float:
    query = urllib.parse.urlencode({"query": QUERY.format(ns=namespace, pod=pod)})
    with urllib.request.urlopen(f"{prometheus_url}/api/v1/query?{query}", timeout=10) as response:
        doc = json.load(response)
    return float(doc["data"]["result"][0]["value"][1])
