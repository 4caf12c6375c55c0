"""The doctor's re-enactment of Alertmanager routing, on the configs that go wrong in practice."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from reactor.tools.doctor import alertmanager
from reactor.tools.doctor.report import Status
from reactor.tools.doctor.routing import deliveries, parse_matcher
from tests.deploy.deploy_helpers import DEPLOY

LABELS = alertmanager.test_alert("ml-workloads")
HOOK = [{"url": "http://gpu-reactor.gpu-reactor.svc:8080/alerts"}]


def _config(*routes: dict[str, Any]) -> dict[str, Any]:
    return {"route": {"receiver": "default", "routes": list(routes)},
            "receivers": [{"name": "default"}, {"name": "gpu-reactor", "webhook_configs": HOOK}, {"name": "chat"}]}


def test_the_committed_alertmanager_config_routes_to_the_reactor() -> None:
    config = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yaml").read_text())
    check = alertmanager.route(config, LABELS)
    assert check.status is Status.OK and "go to gpu-reactor" in check.detail


def test_the_operator_namespace_matcher_is_named_with_the_fix() -> None:
    """AlertmanagerConfig with OnNamespace: the route gets namespace="<its namespace>"; GPU alerts never match."""
    config = _config({"receiver": "gpu-reactor", "matchers": ['namespace="gpu-reactor"', 'reactor="gpu"']})
    check = alertmanager.route(config, LABELS)
    assert check.status is Status.FAILING
    assert 'blocked by namespace="gpu-reactor"' in check.detail and "alertmanagerConfigMatcherStrategy" in check.fix


def test_first_match_wins_unless_continue() -> None:
    chat_first = _config({"receiver": "chat", "matchers": ['severity=~"warning|critical"']},
                         {"receiver": "gpu-reactor", "matchers": ['reactor="gpu"']})
    assert alertmanager.route(chat_first, LABELS).status is Status.FAILING
    chat_first["route"]["routes"][0]["continue"] = True
    assert [d.receiver for d in deliveries(chat_first["route"], LABELS)] == ["chat", "gpu-reactor"]
    assert alertmanager.route(chat_first, LABELS).status is Status.OK


def test_nested_routes_inherit_the_receiver_and_old_match_syntax_works() -> None:
    config = _config({"receiver": "gpu-reactor", "match": {"reactor": "gpu"},
                      "routes": [{"match_re": {"alertname": "GPU.*"}}]})
    (delivery,) = deliveries(config["route"], LABELS)
    assert delivery.receiver == "gpu-reactor"
    assert [str(m) for m in delivery.path] == ['reactor="gpu"', 'alertname=~"GPU.*"']


@pytest.mark.parametrize("text, labels, matches", [
    ('reactor="gpu"', {"reactor": "gpu"}, True),
    ("reactor=gpu", {"reactor": "gpu"}, True),
    ('severity!="info"', {"severity": "info"}, False),
    ('alertname=~"GPU.*"', {"alertname": "XGPUIdle"}, False),  # anchored, as in Alertmanager
    ('namespace!~"kube-.*"', {"namespace": "ml"}, True),
])
def test_matchers(text: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_matcher(text).admits(labels) is matches


def test_a_bad_matcher_is_an_error() -> None:
    """The doctor reads matchers with the parser the stand-in uses (reactor/tools/matchers.py, Alertmanager's)."""
    with pytest.raises(ValueError, match="bad matcher format: reactor"):
        parse_matcher("reactor")
