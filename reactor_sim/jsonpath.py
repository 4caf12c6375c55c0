"""The part of client-go's JSONPath that CRD printer columns use: `.a.b`, `['a.b']`, `[n]`, `[*]`, `[?(@.k=='v')]`.

Upstream: k8s.io/client-go/util/jsonpath (`JSONPath.FindResults` with `AllowMissingKeys(true)`, as the
apiextensions tableconvertor sets it: a missing key yields no result, not an error; `evalToText` prints a result).
"""

from __future__ import annotations

import json
import re
from typing import Any

_STEP = re.compile(r"\.(?P<field>[A-Za-z0-9_$-]+)"
                   r"""|\[(?P<body>'(?:\\.|[^'])*'|"(?:\\.|[^"])*"|\*|-?\d+|\?\(.*?\))\]""")
_FILTER = re.compile(r"\?\(@((?:\.[A-Za-z0-9_$-]+)+)\s*(==|!=)\s*"
                     r"""(?:'([^']*)'|"([^"]*)"|(true|false)|(-?\d+(?:\.\d+)?))\)""")


class PathError(ValueError):
    """A column path outside the subset served here."""


def _steps(path: str) -> list[tuple[str, Any]]:
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    steps: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            raise PathError(f"unrecognized column definition {path!r}")
        if m.group("field") is not None:
            steps.append(("field", m.group("field")))
        else:
            body = m.group("body")
            if body[0] in "'\"":
                steps.append(("field", re.sub(r"\\(.)", r"\1", body[1:-1])))
            elif body == "*":
                steps.append(("all", None))
            elif body.startswith("?"):
                f = _FILTER.fullmatch(body)
                if f is None:
                    raise PathError(f"unrecognized column definition {path!r}")
                literal: Any = f.group(3) if f.group(3) is not None else f.group(4)
                if f.group(5) is not None:
                    literal = f.group(5) == "true"
                elif f.group(6) is not None:
                    literal = float(f.group(6))
                steps.append(("filter", (f.group(1)[1:].split("."), f.group(2), literal)))
            else:
                steps.append(("index", int(body)))
        pos = m.end()
    return steps


def find(obj: Any, path: str) -> list[Any]:
    """The values `path` selects in `obj` (empty where a key is missing)."""
    current = [obj]
    for kind, arg in _steps(path):
        nxt: list[Any] = []
        for node in current:
            if (kind == "field" and isinstance(node, dict) and arg in node) or (
                    kind == "index" and isinstance(node, list) and -len(node) <= arg < len(node)):
                nxt.append(node[arg])
            elif kind == "all" and isinstance(node, list | dict):
                nxt.extend(node if isinstance(node, list) else node.values())
            elif kind == "filter" and isinstance(node, list):
                nxt.extend(item for item in node if _keep(item, *arg))
        current = nxt
    return current


def _keep(item: Any, keys: list[str], op: str, literal: Any) -> bool:
    value: Any = item
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return False
        value = value[key]
    if isinstance(literal, float) and isinstance(value, int | float) and not isinstance(value, bool):
        equal = float(value) == literal
    else:
        equal = value == literal and type(value) is type(literal)
    return equal if op == "==" else not equal


def text(value: Any) -> str:
    """`evalToText`: strings as they are, booleans lower-case, objects and lists as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    if value is None:
        return "<nil>"
    return str(value)
