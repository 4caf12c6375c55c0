"""The background parts (reactor/app/background.py): one list, started in order and stopped in reverse, by the
serving process under gunicorn; which parts a configuration runs; and each part's `run_once` pass."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reactor.app.background import Background, start_all, stop_all
from reactor.app.listeners import bind_listener
from reactor.app.probe_server import ProbeServer
from reactor.observe.verifier import Verifier
from reactor_sim.cluster import SimCluster
from tests.support import HERE, Reactor, build_reactor, make_settings, with_prometheus


class Part:
    """A background part that writes what it is asked to do to `log`."""

    def __init__(self, name: str, log: list[str], *, fail_start: bool = False) -> None:
        self.name, self.log, self.fail_start = name, log, fail_start

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.log.append(f"start {self.name}")

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")

    def run_once(self) -> object:
        self.log.append(f"once {self.name}")
        return None


def test_parts_start_in_order_and_stop_in_reverse() -> None:
    log: list[str] = []
    parts = (Part("a", log), Part("b", log), Part("c", log))
    start_all(parts)
    stop_all(parts)
    assert log == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]


def test_a_part_that_cannot_start_stops_those_started_before_it() -> None:
    log: list[str] = []
    with pytest.raises(RuntimeError, match="b cannot start"):
        start_all((Part("a", log), Part("b", log, fail_start=True), Part("c", log)))
    assert log == ["start a", "stop a"]


def test_a_part_that_fails_to_stop_does_not_keep_the_others_running() -> None:
    log: list[str] = []

    class Stuck(Part):
        def stop(self) -> None:
            raise OSError("stuck")

    stop_all((Part("a", log), Stuck("b", log), Part("c", log)))
    assert log == ["stop c", "stop a"]


def test_the_service_runs_the_parts_its_configuration_needs_in_order(sim: SimCluster, token_file: Path) -> None:
    plain = build_reactor(sim, make_settings(token_file)).service
    assert [type(p).__name__ for p in plain.background] == ["EventPoster", "Verifier"]
    rebalancing = {"rebalance": {"enabled": True, "alertmanagerUrl": "http://127.0.0.1:9"}}
    cached = build_reactor(sim, make_settings(token_file, kube={"watchCache": True}, **rebalancing)).service
    assert [type(p).__name__ for p in cached.background] == ["EventPoster", "Informers", "Verifier", "Rebalancer"]
    dry = build_reactor(sim, make_settings(token_file, dryRun=True, **rebalancing)).service
    assert [type(p).__name__ for p in dry.background] == ["EventPoster"]  # nothing written: nothing to verify
    assert all(isinstance(p, Background) for p in cached.background)


def test_with_a_probe_listener_the_probe_server_comes_first(sim: SimCluster, token_file: Path) -> None:
    from reactor.app.assembly import assemble
    from reactor.cluster.kube import KubeGateway
    from reactor.core.metrics import Metrics

    settings, stand_in = with_prometheus(make_settings(token_file))
    metrics = Metrics()
    listener = bind_listener("127.0.0.1:0")
    try:
        service = assemble(settings, kube=KubeGateway.for_url(sim.url, settings.kube, metrics), metrics=metrics,
                           probe_listener=listener)
        assert isinstance(service.background[0], ProbeServer)
        service.kube.close()
    finally:
        listener.close()
        if stand_in is not None:
            stand_in.stop()


def test_run_once_drives_each_part_without_a_thread(sim: SimCluster, token_file: Path) -> None:
    r: Reactor = build_reactor(sim, make_settings(token_file, kube={"watchCache": True}))
    informers = r.service.informers
    assert informers is not None and informers.unsynced()
    informers.run_once()
    assert informers.unsynced() == []
    assert isinstance(r.service.verifier, Verifier)
    r.service.verifier.run_once()  # nothing pending: a pass that finds nothing to do
    events = r.service.events
    events.post({"metadata": {"namespace": "ml-team", "generateName": "x."}, "reason": "Test", "message": "m",
                 "involvedObject": {"kind": "Deployment", "namespace": "ml-team", "name": "training"}})
    assert events.flush(timeout=10)


SERVED = textwrap.dedent("""
    import sys
    from dataclasses import dataclass
    from reactor.app.runner import run
    from reactor.config.settings import build_settings

    LOG = sys.argv[1]

    class Part:
        def __init__(self, name): self.name = name
        def _say(self, what):
            with open(LOG, "a") as f: f.write(f"{what} {self.name}\\n")
        def start(self): self._say("start")
        def stop(self): self._say("stop")
        def run_once(self): return None

    @dataclass
    class Served:
        app: object
        background: tuple

    def app(environ, start_response):
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    settings = build_settings({"server": {"listen": "127.0.0.1:0", "probeListen": "127.0.0.1:0"}}, {})
    run(settings, lambda probe_listener: Served(app, (Part("first"), Part("second"), Part("third"))))
""")


@pytest.mark.process
def test_the_serving_process_starts_the_list_in_order_and_stops_it_in_reverse(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.touch()
    errors = tmp_path / "stderr"
    with errors.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", SERVED, str(log)], cwd=HERE.parent,
                                env={**os.environ, "PYTHONPATH": str(HERE.parent)}, stderr=stderr)
    try:
        deadline = time.monotonic() + 30
        while "start third" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, errors.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert log.read_text().split("\n")[:-1] == ["start first", "start second", "start third",
                                                 "stop third", "stop second", "stop first"]
