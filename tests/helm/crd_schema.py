"""Validates custom resources against their CRD's openAPIV3Schema, as the API server does, with jsonschema.

The CRDs are upstream's (tests/fixtures/crds, each with its source and version in its header). An
openAPIV3Schema is not quite JSON Schema: the API server rejects a field the schema does not declare
(kubectl's default `--validate=strict`, server-side field validation) unless the object says
`x-kubernetes-preserve-unknown-fields` or declares `additionalProperties`. `structural` spells that out as
`additionalProperties: false`, so a misspelled field fails here as it fails in a cluster.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRDS = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
ALERTMANAGER_CONFIG_CRD = CRDS / "monitoring.coreos.com_alertmanagerconfigs.yaml"


def structural(schema: Any) -> Any:
    """The schema with unknown fields forbidden wherever the API server forbids them (at every depth)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "properties" in schema:
        out["properties"] = {name: structural(s) for name, s in schema["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if key in schema:
            out[key] = structural(schema[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            out[key] = [structural(s) for s in schema[key]]
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@cache
def _crd(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert doc["kind"] == "CustomResourceDefinition", path
    return doc


def served(path: Path) -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) → the Draft 7 validator of that served version's schema."""
    crd = _crd(path)
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    return {(f"{group}/{v['name']}", kind): jsonschema.Draft7Validator(structural(v["schema"]["openAPIV3Schema"]))
            for v in crd["spec"]["versions"] if v.get("served")}


def problems(obj: dict[str, Any], crd: Path) -> list[str]:
    """Every schema violation of `obj` as "path: message"; empty when the CRD's schema accepts it."""
    validators = served(crd)
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in validators:
        return [f"(top): {key[1]} {key[0]} is not served by {crd.name} (serves {sorted(validators)})"]
    errors = sorted(validators[key].iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]
