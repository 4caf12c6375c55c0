"""The Grafana dashboard survives a round trip through grafana-foundation-sdk (Grafana 11.6's own schema).

Decoding with the SDK's typed models and encoding back must keep every value of the committed JSON: a
misspelled field, a field in the wrong place or a value of the wrong type is lost or changed on the way,
and fails here. The SDK adds its defaults; only the source's values are compared.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as grafana
from grafana_foundation_sdk.models import prometheus

from tests.deploy.deploy_helpers import DEPLOY

# Not in the 11.6 schema's VariableModel: the query editor's display text, rebuilt from `query` by Grafana.
DROPPED = {"definition"}


def _lost(source: Any, encoded: Any, path: str = "") -> list[str]:
    """Paths where a value of `source` is missing or different in `encoded`."""
    if isinstance(source, dict) and isinstance(encoded, dict):
        return [p for k, v in source.items() if k not in DROPPED
                for p in (_lost(v, encoded[k], f"{path}.{k}") if k in encoded else [f"{path}.{k} (dropped)"])]
    if isinstance(source, list) and isinstance(encoded, list) and len(source) == len(encoded):
        return [p for i, (a, b) in enumerate(zip(source, encoded, strict=True)) for p in _lost(a, b, f"{path}[{i}]")]
    return [] if source == encoded else [f"{path}: {source!r} -> {encoded!r}"]


def _round_trip(source: dict[str, Any]) -> tuple[grafana.Dashboard, dict[str, Any]]:
    plugins.register_default_plugins()
    model = grafana.Dashboard.from_json(source)
    return model, json.loads(json.dumps(model, cls=JSONEncoder))


@pytest.fixture(scope="module")
def source() -> dict[str, Any]:
    return dict(json.loads((DEPLOY / "grafana" / "gpu-reactor-dashboard.json").read_text()))


def test_every_value_survives_the_round_trip(source: dict[str, Any]) -> None:
    _, encoded = _round_trip(source)
    assert _lost(source, encoded) == []


def test_panels_and_queries_decode_into_typed_models(source: dict[str, Any]) -> None:
    model, _ = _round_trip(source)
    panels = [p for p in model.panels or [] if isinstance(p, grafana.Panel)]
    rows = [p for p in model.panels or [] if isinstance(p, grafana.RowPanel)]
    assert panels and len(panels) + len(rows) == len(source["panels"])
    targets = [t for p in panels for t in p.targets or []]
    assert targets and all(isinstance(t, prometheus.Dataquery) and t.expr for t in targets)


def test_the_round_trip_catches_a_misplaced_field(source: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(source))
    broken["panels"][1]["gridpos"] = broken["panels"][1].pop("gridPos")  # misspelled: the SDK drops it
    _, encoded = _round_trip(broken)
    assert any("gridpos (dropped)" in p for p in _lost(broken, encoded))
