"""Assertions on `ApiException` Status bodies."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import ApiException


def status_of(call: Callable[[], Any], code: int) -> dict[str, Any]:
    """Run a client call that must fail with `code`; return its parsed Status body."""
    with pytest.raises(ApiException) as info:
        call()
    assert info.value.status == code, info.value.body
    body = json.loads(info.value.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == code
    return body
