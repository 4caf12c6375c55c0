"""What the operator-case tests do to a running reactor, one way for all: post one alert and read its one outcome,
run `reactor plan` on one alert, give the namespace's GPU quota headroom, read a workload's Events."""

from __future__ import annotations

import dataclasses
import io
from contextlib import redirect_stdout
from typing import Any

from reactor.app.assembly import build_engine
from reactor.intake.alerts import parse_notification
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.plan import print_plan
from tests.adapters.operators import GPU
from tests.support import NAMESPACE, Reactor


def post(reactor: Reactor, alert: str, pod: str, name: str, *values: Any, **kw: Any) -> dict[str, Any]:
    """One alert on `pod`'s container `name` (AlertSpec's value and gpus, by position or name): its one outcome."""
    r = reactor.post(notification([AlertSpec(alert, NAMESPACE, pod, name, *values, **kw)]))
    assert r.status_code == 200, r.get_json()
    (outcome,) = r.get_json()["outcomes"]
    return outcome


def plan(reactor: Reactor, alert: str, pod: str, name: str, value: float, gpus: int) -> str:
    """`reactor plan`: the engine in dry run and `print_plan`, as tests/adapters/test_plan.py runs them."""
    settings = reactor.service.engine.settings
    dry = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, dry_run=True))
    engine = build_engine(dry, kube=reactor.service.kube, metrics=reactor.service.engine.metrics)[0]
    out = io.StringIO()
    with redirect_stdout(out):
        print_plan(engine.handle(parse_notification(notification([AlertSpec(alert, NAMESPACE, pod, name, value,
                                                                                      gpus)]))), engine.settings)
    return out.getvalue()


def headroom(reactor: Reactor, gpus: int) -> None:
    """The namespace's GPU quota set to what is in use plus `gpus`."""
    quota = reactor.sim.get("resourcequotas", NAMESPACE, "gpu-quota")
    quota["spec"]["hard"][f"requests.{GPU}"] = str(int(quota["status"]["used"][f"requests.{GPU}"]) + gpus)
    reactor.sim.apply(quota)
    reactor.sim.settle()


def events(reactor: Reactor, name: str, reason: str = "") -> list[dict[str, Any]]:
    """The Events on the object `name` (of `reason`, where one is given)."""
    return [e for e in reactor.sim.list("events", NAMESPACE)
            if e["involvedObject"]["name"] == name and (not reason or e["reason"] == reason)]
