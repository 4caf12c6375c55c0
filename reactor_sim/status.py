"""Kubernetes `Status` bodies and the error type that carries them.

Messages follow the upstream apimachinery constructors (k8s.io/apimachinery/pkg/api/errors).
This module does no I/O.
"""

from __future__ import annotations

from typing import Any

from reactor_sim.registry import Resource

Body = dict[str, Any]


class ApiError(Exception):
    """An error the API server answers with a `Status` body."""

    def __init__(self, code: int, reason: str, message: str, details: Body | None = None,
                 headers: dict[str, str] | None = None, *, keep_empty_details: bool = False) -> None:
        super().__init__(message)
        # Upstream sends `"details": {}` where it builds a StatusDetails with nothing in it (a
        # forbidden non-resource path); most errors build none and send no `details` at all.
        self.keep_empty_details = keep_empty_details
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details if details is not None else {}
        self.headers = headers or {}

    def body(self) -> Body:
        out: Body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": self.message, "reason": self.reason}
        if self.details or self.keep_empty_details:
            out["details"] = self.details
        out["code"] = self.code
        return out


def _details(res: Resource, name: str) -> Body:
    out: Body = {"name": name}
    if res.group:
        out["group"] = res.group
    out["kind"] = res.plural
    return out


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.qualified} "{name}" not found', _details(res, name))


def already_exists(res: Resource, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{res.qualified} "{name}" already exists', _details(res, name))


def conflict(res: Resource, name: str) -> ApiError:
    msg = (f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been modified; '
           "please apply your changes to the latest version and try again")
    return ApiError(409, "Conflict", msg, _details(res, name))


def forbidden(res: Resource, name: str, why: str) -> ApiError:
    return ApiError(403, "Forbidden", f'{res.qualified} "{name}" is forbidden: {why}', _details(res, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def unsupported_media_type(content_type: str, *, custom: bool = False) -> ApiError:
    """A patch type the resource does not take; custom resources take no strategic merge (apiextensions)."""
    accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    if not custom:
        accepted += ", application/strategic-merge-patch+json"
    return ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                    f"accepted media types include: {accepted} (got {content_type})")


def generic_invalid() -> ApiError:
    """What a failed JSON-patch apply (e.g. a `test` op) gives: 422 with no details."""
    return ApiError(422, "Invalid", "the server rejected our request due to an error in our request")


class FieldError:
    """One `field.Error`: rendered as `<field>: <Type>: <detail>` like upstream."""

    _REASONS = {"Invalid value": "FieldValueInvalid", "Required value": "FieldValueRequired",
                "Forbidden": "FieldValueForbidden", "Unsupported value": "FieldValueNotSupported"}

    def __init__(self, path: str, kind: str, detail: str, value: object = None) -> None:
        self.path, self.kind, self.detail, self.value = path, kind, detail, value

    # field.Error.ErrorBody: these types print no value; every other type prints the bad value.
    _NO_VALUE = ("Required value", "Forbidden", "Too long", "Internal error")

    def cause_message(self) -> str:
        head = self.kind if self.kind in self._NO_VALUE else f"{self.kind}: {_render(self.value)}"
        return f"{head}: {self.detail}" if self.detail else head

    def __str__(self) -> str:
        return f"{self.path}: {self.cause_message()}"

    def cause(self) -> Body:
        return {"reason": self._REASONS.get(self.kind, "FieldValueInvalid"),
                "message": self.cause_message(), "field": self.path}


def _render(value: object) -> str:
    if type(value) is str:
        return f'"{value}"'
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def invalid(res: Resource, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid: details.kind is the Kind (not the plural), unlike 403/404/409."""
    joined = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(map(str, errors)) + "]"
    details: Body = {"name": name}
    if res.group:
        details["group"] = res.group
    details["kind"] = res.kind
    details["causes"] = [e.cause() for e in errors]
    return ApiError(422, "Invalid", f'{res.qualified_kind} "{name}" is invalid: {joined}', details)


_REASON_BY_CODE = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                   405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 422: "Invalid",
                   429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


def for_code(code: int, *, retry_after: int | None = None) -> ApiError:
    """A plausible upstream Status for an injected fault."""
    reason = _REASON_BY_CODE.get(code, "Unknown")
    messages = {429: "Too many requests: please try again later",
                500: "Internal error occurred: injected fault",
                503: "the server is currently unable to handle the request",
                504: "Timeout: request did not complete within the allowed duration"}
    msg = messages.get(code, f"the server responded with the status code {code} (injected fault)")
    details: Body = {}
    headers: dict[str, str] = {}
    if retry_after is not None:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(code, reason, msg, details, headers)
