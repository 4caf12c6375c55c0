"""Custom resources checked as kube-apiserver checks them against their CRD's openAPIV3Schema.

Pruning first (apiextensions-apiserver's structural pruning): a field the schema does not name is
dropped, unless its object says `x-kubernetes-preserve-unknown-fields: true`; `apiVersion`, `kind`
and `metadata` at the root and in `x-kubernetes-embedded-resource` objects are kept. Then
validation of what is left: `type` (with `nullable` and `x-kubernetes-int-or-string`), `required`,
`enum`, `minimum` and `maximum`, with upstream's messages ("in body must be of type integer").
Pure: it changes the object it is given and returns field errors; it stores nothing.
"""

from __future__ import annotations

from typing import Any

from reactor_sim.status import FieldError

Schema = dict[str, Any]
_ROOT_KEPT = ("apiVersion", "kind", "metadata")
_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,),
                                        "integer": (int,), "number": (int, float), "boolean": (bool,)}


# metav1.ObjectMeta's fields: the metadata of a custom object (and of an embedded resource) is decoded into it and
# written back, so any other key is dropped (apiextensions-apiserver pkg/apiserver/schema/objectmeta/coerce.go
# Coerce with dropInvalidFields, after pruning/algorithm.go PruneWithOptions skipped apiVersion, kind, metadata).
OBJECT_META = frozenset({"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
                         "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                         "annotations", "ownerReferences", "finalizers", "managedFields"})


def prune(obj: Any, schema: Schema, *, root: bool = False) -> Any:
    """Drop the fields `schema` does not know, recursively; returns `obj` (changed in place)."""
    if isinstance(obj, dict):
        keep_meta = root or schema.get("x-kubernetes-embedded-resource") is True
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        for key in list(obj):
            if keep_meta and key in _ROOT_KEPT:
                if key == "metadata" and isinstance(obj[key], dict):
                    for unknown in set(obj[key]) - OBJECT_META:
                        del obj[key][unknown]
                continue
            if isinstance(properties, dict) and key in properties:
                prune(obj[key], properties[key])
            elif isinstance(extra, dict):
                prune(obj[key], extra)
            elif not preserve and extra is not True:
                del obj[key]
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            prune(item, schema["items"])
    return obj


def validate(obj: Any, schema: Schema, path: str = "") -> list[FieldError]:
    """Field errors of `obj` against `schema`, paths spelled as upstream (`spec.replicas`)."""
    type_error = _type_error(obj, schema, path)
    if type_error is not None:
        return [type_error]
    if obj is None:
        return []
    errors = _value_errors(obj, schema, path)
    if isinstance(obj, dict):
        errors += _object_errors(obj, schema, path)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            errors += validate(item, schema["items"], f"{path}[{i}]")
    return errors


def _type_error(obj: Any, schema: Schema, path: str) -> FieldError | None:
    if schema.get("x-kubernetes-int-or-string") is True:
        ok = obj is None and schema.get("nullable") is True or _is(obj, "integer") or isinstance(obj, str)
        return None if ok else _wrong_type(obj, "integer or string", path)
    wanted = schema.get("type")
    if obj is None:
        return None if schema.get("nullable") is True or not wanted else _wrong_type(obj, wanted, path)
    if not wanted or _is(obj, wanted):
        return None
    return _wrong_type(obj, wanted, path)


def _is(value: Any, wanted: str) -> bool:
    if isinstance(value, bool) and wanted != "boolean":
        return False
    if wanted == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(wanted, (object,)))


def _wrong_type(value: Any, wanted: str, path: str) -> FieldError:
    got = _json_type(value)
    return FieldError(path, "Invalid value", f"{path} in body must be of type {wanted}: \"{got}\"", got)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return names.get(type(value), type(value).__name__)


def _value_errors(obj: Any, schema: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    enum = schema.get("enum")
    if isinstance(enum, list) and obj not in enum:
        allowed = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in enum)
        errors.append(FieldError(path, "Unsupported value", f"supported values: {allowed}", obj))
    number = isinstance(obj, int | float) and not isinstance(obj, bool)
    if number and "minimum" in schema and obj < schema["minimum"]:
        errors.append(FieldError(path, "Invalid value",
                                 f"{path} in body should be greater than or equal to {schema['minimum']}", obj))
    if number and "maximum" in schema and obj > schema["maximum"]:
        errors.append(FieldError(path, "Invalid value",
                                 f"{path} in body should be less than or equal to {schema['maximum']}", obj))
    return errors


def _object_errors(obj: dict[str, Any], schema: Schema, path: str) -> list[FieldError]:
    errors = [FieldError(_join(path, key), "Required value", "")
              for key in schema.get("required") or [] if key not in obj]
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, value in obj.items():
        if not path and key in _ROOT_KEPT:
            continue
        sub = properties.get(key, extra if isinstance(extra, dict) else None)
        if isinstance(sub, dict):
            errors += validate(value, sub, _join(path, key))
    return errors


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def admit(obj: dict[str, Any], schema: Schema) -> list[FieldError]:
    """Prune then validate a whole custom object, as the API server does on create, update and patch."""
    prune(obj, schema, root=True)
    return validate(obj, schema)
