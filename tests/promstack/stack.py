"""A real Prometheus and Alertmanager on loopback, for the end-to-end tests.

Prometheus scrapes the fake exporter and evaluates the FAST rendered rules (every 1s);
Alertmanager runs the route of deploy/alertmanager/alertmanager.yaml with short timers and the
webhook URL and token file the test gives. Both are stopped by PID, also when a test fails.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from reactor.tools.launcher import free_port
from reactor.tools.rules import render_to
from tests.rules.conftest import require_tool

REPO = Path(__file__).resolve().parents[2]
FAST_VALUES = REPO / "rules/tests/thresholds-fast.yaml"
ALERTMANAGER_CONFIG = REPO / "deploy/alertmanager/alertmanager.yaml"
PROMETHEUS_BIN = "/usr/bin/prometheus"
ALERTMANAGER_BIN = "/usr/bin/prometheus-alertmanager"
# The exporter's own target labels as the dcgm-exporter chart's ServiceMonitor produces them:
# with honor_labels false, the workload's labels arrive as exported_namespace/pod/container.
EXPORTER_TARGET_LABELS = {
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-abcde",
    "container": "nvidia-dcgm-exporter",
}


def get_json(url: str) -> tuple[int, Any]:
    """GET `url`: the status and the JSON body, of a refusal too (an empty body reads as null)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def binaries() -> dict[str, str]:
    """The real Prometheus and Alertmanager, as `promstack`'s keyword arguments (one missing skips the test, or
    fails it under PROMSTACK_REQUIRED=1)."""
    return {"prometheus_bin": require_tool(Path(PROMETHEUS_BIN).name),
            "alertmanager_bin": require_tool(Path(ALERTMANAGER_BIN).name)}


class StackError(RuntimeError):
    """A process did not start or did not become ready; the message carries its log."""


def alertmanager_config(*, webhook_url: str, token_file: Path, group_wait: str = "1s", group_interval: str = "2s",
                        routes_before: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """deploy/alertmanager's config with test timers and the test's receiver address and token.

    `routes_before`: routes tried before deploy/'s gpu-reactor route (first match wins, `continue: false`), as an
    operator adds one to send some of the reactor's alerts elsewhere."""
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text(encoding="utf-8"))
    config["route"]["routes"][:0] = [dict(r) for r in routes_before]
    route = next(r for r in config["route"]["routes"] if r["receiver"] == "gpu-reactor")
    route.update(group_wait=group_wait, group_interval=group_interval, repeat_interval="1h")
    receiver = next(r for r in config["receivers"] if r["name"] == "gpu-reactor")
    hook = receiver["webhook_configs"][0]
    hook["url"] = webhook_url
    hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    return config


def prometheus_config(*, rule_file: Path, exporter: str, alertmanager: str, target_labels: Mapping[str, str], honor_labels: bool,
                      cadvisor: str | None = None) -> dict[str, Any]:
    """`cadvisor`: also scrape a kubelet's cAdvisor endpoint, as kube-prometheus-stack does (honor_labels)."""
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rule_file)],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": [
            {
                "job_name": "dcgm-exporter",
                "honor_labels": honor_labels,
                "static_configs": [{"targets": [exporter], "labels": dict(target_labels)}],
            }
        ],
    }
    if cadvisor is not None:
        config["scrape_configs"].append(
            {"job_name": "kubelet", "honor_labels": True, "static_configs": [{"targets": [cadvisor]}]})
    return config


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)


@dataclass
class PromStack:
    """The running pair. `query(...)` asks Prometheus; `alerts()` lists Alertmanager's alerts."""

    prometheus_url: str
    alertmanager_url: str
    rule_file: Path
    processes: list[_Process] = field(default_factory=list)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as response:
            return list(json.load(response)["data"]["result"])

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.alertmanager_url}/api/v2/alerts", timeout=5) as response:
            return list(json.load(response))

    def wait_for_query(self, expr: str, *, timeout: float = 20.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result:
                return result
            time.sleep(0.2)
        raise StackError(f"no result for {expr!r} within {timeout}s")


def _spawn(name: str, argv: list[str], workdir: Path) -> _Process:
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True)
    return _Process(name, popen, log)


def _wait_ready(process: _Process, url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise StackError(f"{process.name} exited with {process.popen.returncode}:\n{process.tail()}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
            if response.status == 200:
                return
        time.sleep(0.1)
    raise StackError(f"{process.name} not ready at {url} within {timeout}s:\n{process.tail()}")


@contextlib.contextmanager
def lone_alertmanager(workdir: Path, config: Mapping[str, Any]) -> Iterator[str]:
    """An Alertmanager of its own (no cluster peers) with `config`, on a free port: its URL while the block runs."""
    binary = require_tool(Path(ALERTMANAGER_BIN).name)
    (workdir / "alertmanager.yaml").write_text(yaml.safe_dump(dict(config)))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = _spawn("alertmanager", [
        binary, f"--config.file={workdir / 'alertmanager.yaml'}", f"--storage.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", f"--web.external-url={url}", "--cluster.listen-address=",
    ], workdir)
    try:
        _wait_ready(process, url, 20.0)
        yield url
    finally:
        process.stop()


@contextlib.contextmanager
def promstack(
    workdir: Path,
    *,
    exporter: str,
    webhook_url: str,
    token_file: Path,
    values: Path = FAST_VALUES,
    target_labels: Mapping[str, str] | None = None,
    honor_labels: bool = False,
    ready_timeout: float = 20.0,
    prometheus_bin: str = PROMETHEUS_BIN,
    alertmanager_bin: str = ALERTMANAGER_BIN,
    cadvisor: str | None = None,
    routes_before: Sequence[Mapping[str, Any]] = (),
) -> Iterator[PromStack]:
    """Start Alertmanager, then Prometheus; yield when both answer /-/ready; always stop both.

    `target_labels` default to the exporter's own (gpu-operator) labels, so with
    `honor_labels` false the workload's labels arrive in their `exported_*` spelling.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    rule_file = render_to(values, workdir / "render")
    am_port, prom_port = free_port(), free_port()
    am_url, prom_url = f"http://127.0.0.1:{am_port}", f"http://127.0.0.1:{prom_port}"
    am_config = workdir / "alertmanager.yaml"
    am_config.write_text(yaml.safe_dump(alertmanager_config(webhook_url=webhook_url, token_file=token_file,
                                                              routes_before=routes_before)))
    prom_config = workdir / "prometheus.yaml"
    labels = EXPORTER_TARGET_LABELS if target_labels is None else target_labels
    prom = prometheus_config(
        rule_file=rule_file, exporter=exporter, alertmanager=f"127.0.0.1:{am_port}", target_labels=labels, honor_labels=honor_labels,
        cadvisor=cadvisor,
    )
    prom_config.write_text(yaml.safe_dump(prom))
    stack = PromStack(prom_url, am_url, rule_file)
    try:
        stack.processes.append(
            _spawn(
                "alertmanager",
                [
                    alertmanager_bin,
                    f"--config.file={am_config}",
                    f"--storage.path={workdir / 'am-data'}",
                    f"--web.listen-address=127.0.0.1:{am_port}",
                    f"--web.external-url={am_url}",
                    "--cluster.listen-address=",
                    "--log.level=info",
                ],
                workdir,
            )
        )
        stack.processes.append(
            _spawn(
                "prometheus",
                [
                    prometheus_bin,
                    f"--config.file={prom_config}",
                    f"--storage.tsdb.path={workdir / 'prom-data'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                    f"--web.external-url={prom_url}",
                    "--rules.alert.resend-delay=1s",
                    "--log.level=info",
                ],
                workdir,
            )
        )
        for process, url in zip(stack.processes, (am_url, prom_url)):
            _wait_ready(process, url, ready_timeout)
        yield stack
    finally:
        stack.stop()


@dataclass(frozen=True)
class Delivery:
    """One webhook request as received: when, its Authorization header, its JSON body.

    With `forward_to` set, also what the relay target answered (`status`, `answer`: its JSON
    body or None) and when (`answered`, time.monotonic()); the delivery is recorded once answered.
    """

    at: float  # time.monotonic()
    authorization: str
    body: dict[str, Any]
    status: int = 200
    answer: Any = None
    answered: float | None = None


class WebhookSink:
    """A stdlib HTTP receiver standing in for the reactor: records every POST and answers 200.

    Set `forward_to` to a URL to relay each request there instead (the answer is relayed back),
    so one session-wide stack can feed a real reactor started later.
    """

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.forward_to: str | None = None
        # A test's tampering on the way (what a compromised hop could do): the relayed body is rewrite(body), and
        # the delivery records what was relayed.
        self.rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self._changed = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook-sink", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/alerts"

    def start(self) -> WebhookSink:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, match: Callable[[Delivery], bool], *, timeout: float) -> Delivery:
        """The first delivery (old or new) that `match`es; `StackError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((d for d in self.deliveries if match(d)), None)
                left = deadline - time.monotonic()
                if found is not None:
                    return found
                if left <= 0:
                    raise StackError(f"no matching webhook within {timeout}s; got {len(self.deliveries)} deliveries")
                self._changed.wait(left)

    def _record(self, delivery: Delivery) -> None:
        with self._changed:
            self.deliveries.append(delivery)
            self._changed.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                arrived = time.monotonic()
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if sink.rewrite is not None:
                    raw = json.dumps(sink.rewrite(json.loads(raw or b"{}"))).encode()
                delivery = Delivery(arrived, self.headers.get("Authorization", ""), json.loads(raw or b"{}"))
                if sink.forward_to:
                    status, body = sink._relay(raw, self.headers)
                    delivery = replace(delivery, status=status, answer=_json_or_none(body), answered=time.monotonic())
                else:
                    status, body = 200, b"{}"
                sink._record(delivery)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                pass

        return Handler

    def _relay(self, raw: bytes, headers: Any) -> tuple[int, bytes]:
        request = urllib.request.Request(str(self.forward_to), data=raw, method="POST")
        for name in ("Authorization", "Content-Type", "User-Agent"):
            if headers.get(name):
                request.add_header(name, headers[name])
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError:
            return 503, b'{"error": "relay target unreachable"}'


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
