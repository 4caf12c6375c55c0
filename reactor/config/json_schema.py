"""The policy file as a JSON schema, generated from the settings schema (`settings._SCHEMA`) and each parser's
recorded description (`fields.json_schema_of`), and written into the Helm chart's `values.schema.json`.

Helm validates `policy:` with it before rendering, so a typo (`dryrun`), a bad duration or an unknown alert stops
`helm install` instead of the pods (`reactor serve` exits 2). What a JSON schema cannot say (gpus.min <= gpus.max,
reverseAfter >= cooldown, ...) the chart's templates check at render time (templates/_helpers.tpl
"gpu-reactor.checkPolicy"); the reactor stays the authority and checks everything again at start.

    python -m reactor.config.json_schema --write deploy/helm/gpu-reactor/values.schema.json
    python -m reactor.config.json_schema --check deploy/helm/gpu-reactor/values.schema.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reactor.config.fields import json_schema_of
from reactor.config.settings import _SCHEMA, _SECTIONS

# Keys the chart sets itself (from `ports`, the token and state-key Secrets, the release): refused in `policy`.
CHART_OWNED = {
    "server.listen": "set by the chart from ports.http",
    "server.probeListen": "set by the chart from ports.metrics",
    "server.tokenFile": "set by the chart from webhookToken",
    "state.keyFile": "set by the chart from stateKey",
    "state.previousKeyFile": "set by the chart from stateKey",
    "verify.leaseNamespace": "set by the chart: the release namespace",
    "verify.leaseName": "set by the chart: <fullname>-verifier",
    "rebalance.alertmanagerTokenFile": "set by the chart from rebalanceSource.tokenSecret",
    "rebalance.alertmanagerCaFile": "set by the chart from rebalanceSource.caConfigMap",
}
_K8S_NAME = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}


def policy_schema() -> dict[str, Any]:
    """The policy file: every key of `_SCHEMA` with its parser's schema, no other key (a typo is refused)."""
    root: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}
    for path, (_, _, parse) in _SCHEMA.items():
        node = root
        *parents, leaf = path.split(".")
        for part in parents:
            assert part in _SECTIONS, path
            node = node["properties"].setdefault(part, {"type": "object", "additionalProperties": False,
                                                        "properties": {}})
        node["properties"][leaf] = json_schema_of(parse)
    # A cross-field rule a schema can say (settings._inconsistencies: "lists a class twice").
    root["properties"]["priorityLadder"] = {"allOf": [root["properties"]["priorityLadder"], {"uniqueItems": True}]}
    return _sorted(root)


def chart_policy_schema() -> dict[str, Any]:
    """`policy_schema` as the chart takes it: chart-owned keys refused, the namespace lists as YAML lists (the
    templates bind a Role per allowed namespace), `namespaces.allow` required."""
    schema = policy_schema()
    for path, why in CHART_OWNED.items():
        section, leaf = path.split(".")
        schema["properties"][section]["properties"][leaf] = {"not": {}, "description": why}
    namespaces = schema["properties"]["namespaces"]
    namespaces["properties"]["allow"] = {
        "type": "array", "uniqueItems": True, "description": "namespaces the reactor may act in; one RoleBinding each",
        "items": {"anyOf": [_K8S_NAME, {"const": "*"}]}}
    namespaces["properties"]["deny"] = {"type": "array", "items": _K8S_NAME}
    namespaces["required"] = ["allow"]
    schema["required"] = ["namespaces"]
    schema["description"] = ("the reactor's policy file, generated from reactor/config/settings.py "
                             "(python -m reactor.config.json_schema); the reactor checks it again at start")
    return _sorted(schema)


def _sorted(node: Any) -> Any:
    """Properties in a stable order, so the committed file diffs only where the settings changed."""
    if isinstance(node, dict):
        return {k: _sorted(v) if k != "properties" else {p: _sorted(v[p]) for p in sorted(v)} for k, v in node.items()}
    if isinstance(node, list):
        return [_sorted(v) for v in node]
    return node


def with_policy(values_schema: dict[str, Any]) -> dict[str, Any]:
    """The chart's values schema with `properties.policy` replaced by the generated one (the rest kept)."""
    out = dict(values_schema)
    out["properties"] = {**values_schema["properties"], "policy": chart_policy_schema()}
    return out


def render(values_schema: dict[str, Any]) -> str:
    return json.dumps(with_policy(values_schema), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactor.config.json_schema", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="PATH", help="replace `properties.policy` in this values.schema.json")
    group.add_argument("--check", metavar="PATH", help="exit 1 when PATH's policy schema is not the generated one")
    group.add_argument("--print", action="store_true", help="print the policy file's own schema")
    args = parser.parse_args(argv)
    if args.print:
        sys.stdout.write(json.dumps(policy_schema(), indent=2) + "\n")
        return 0
    path = Path(args.write or args.check)
    try:
        text = path.read_text(encoding="utf-8")
        current = json.loads(text)
    except (OSError, ValueError) as e:
        print(f"{path}: cannot read a JSON schema: {e}", file=sys.stderr)
        return 2
    wanted = render(current)
    if args.write:
        if wanted != text:
            path.write_text(wanted, encoding="utf-8")
        return 0
    if wanted != text:
        print(f"{path}: policy schema is stale; run python -m reactor.config.json_schema --write {path}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
