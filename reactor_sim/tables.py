"""The `meta.k8s.io/v1 Table` form kubectl asks for (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`).

Upstream: k8s.io/apiserver pkg/endpoints/handlers/response.go `asTable` (the table from the resource's
TableConvertor, then each row's `object` by the `includeObject` query parameter: `Object` the whole object,
`Metadata` or unset a PartialObjectMetadata, `None` nothing, anything else a 400), kubernetes
pkg/printers/tablegenerator.go `GenerateTable` (list metadata: resourceVersion, continue, remainingItemCount; an
object's resourceVersion), and for custom resources apiextensions-apiserver
pkg/registry/customresource/tableconvertor (`New`: a Name column, then the CRD version's
`additionalPrinterColumns`, or `Age` from `.metadata.creationTimestamp` when it has none —
customresource_handler.go `serveDefaultColumnsIfEmpty`; `cellForJSONValue` types the cells). Kinds this server has
no printer for are not offered as a Table (negotiation passes the clause over, as for a form it cannot give).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reactor_sim import jsonpath, printers
from reactor_sim.negotiation import TABLE
from reactor_sim.registry import Registry, Resource
from reactor_sim.status import ApiError

Obj = dict[str, Any]
INCLUDE = ("Object", "Metadata", "None", "")


def include_object(query: dict[str, str]) -> str:
    """The `includeObject` parameter, checked before the read (asTable's 400 for an unknown value)."""
    value = query.get("includeObject", "")
    if value not in INCLUDE:
        raise ApiError(400, "BadRequest", f'unrecognized includeObject value: "{value}"')
    return value


def convert(answer: Obj, res: Resource, registry: Registry, api_version: str, include: str, now: datetime,
            *, is_list: bool, headers: bool = True) -> Obj:
    """`answer` (an object or a list) as a Table of `api_version` (meta.k8s.io/v1 or v1beta1)."""
    columns, cells = _convertor(res, registry)
    items = answer.get("items") or [] if is_list else [answer]
    meta = answer.get("metadata") or {}
    table_meta = {k: meta[k] for k in ("resourceVersion", "continue", "remainingItemCount") if k in meta} \
        if is_list else ({"resourceVersion": meta["resourceVersion"]} if "resourceVersion" in meta else {})
    rows = []
    for item in items:
        row: Obj = {"cells": cells(item, now)}
        conditions = printers.pod_conditions(item) if (res.group, res.kind) == ("", "Pod") else []
        if conditions:
            row["conditions"] = conditions
        row["object"] = _object(item, res, api_version, include)
        rows.append(row)
    return {"kind": TABLE, "apiVersion": api_version, "metadata": table_meta,
            "columnDefinitions": list(columns) if headers else None, "rows": rows}


def _object(item: Obj, res: Resource, api_version: str, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return {"apiVersion": res.api_version, "kind": res.kind, **item}
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": item.get("metadata") or {}}


Cells = Callable[[Obj, datetime], list[Any]]
# apiserver pkg/registry/rest/table.go defaultTableConvertor: the columns of a built-in kind without a printer.
DEFAULT_COLUMNS = (printers.NAME, printers.column("Created At", "date", printers.CREATED_DOC))


def _convertor(res: Resource, registry: Registry) -> tuple[tuple[Obj, ...], Cells]:
    printer = printers.printer_for(res.group, res.kind)
    if printer is not None:
        return printer.columns, printer.cells
    if registry.schema_of(res) is not None:
        return _custom(registry.printer_columns.get((res.group, res.version, res.kind)) or [])
    return DEFAULT_COLUMNS, _default_cells


def _default_cells(obj: Obj, now: datetime) -> list[Any]:
    """defaultTableConvertor.ConvertToTable: the name, and creationTimestamp as RFC 3339 in UTC."""
    created = printers.parse_time(str((obj.get("metadata") or {}).get("creationTimestamp") or ""))
    return [printers.name(obj), created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if created else None]


def _custom(columns: list[Obj]) -> tuple[tuple[Obj, ...], Cells]:
    """tableconvertor.New and convertor.ConvertToTable for a custom resource."""
    columns = columns or [{"name": "Age", "type": "date", "description": printers.CREATED_DOC,
                           "jsonPath": ".metadata.creationTimestamp"}]
    defs = (printers.NAME, *(printers.column(
        str(c.get("name", "")), str(c.get("type", "string")),
        str(c.get("description") or f"Custom resource definition column (in JSONPath format): {c.get('jsonPath')}"),
        priority=int(c.get("priority") or 0), fmt=str(c.get("format") or "")) for c in columns))
    paths = [str(c.get("jsonPath", "")) for c in columns]
    kinds = [str(c.get("type", "string")) for c in columns]

    def cells(obj: Obj, now: datetime) -> list[Any]:
        out: list[Any] = [printers.name(obj)]
        for path, kind in zip(paths, kinds, strict=True):
            found = jsonpath.find(obj, path)
            if not found:
                out.append(None)
            elif kind == "string":
                out.append(jsonpath.text(found[0]))
            else:
                out.append(cell_for_json_value(kind, found[0], now))
        return out

    return defs, cells


def cell_for_json_value(kind: str, value: Any, now: datetime) -> Any:
    """tableconvertor `cellForJSONValue`: the value in the column's type, None when it is not of that type."""
    if value is None:
        return None
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        if not value:
            return "<unknown>"  # a zero metav1.Time: ConvertToHumanReadableDateType
        when = printers.parse_time(value)
        return "<invalid>" if when is None else printers.human_duration((now - when).total_seconds())
    return None
