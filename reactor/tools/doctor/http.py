"""Plain HTTP for the doctor (urllib, no extra dependency): JSON GETs from Prometheus and Alertmanager.

Every call has a timeout; failures become `Unreachable` with the URL and the reason, never a traceback.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TIMEOUT = 10.0


class Unreachable(Exception):
    """The URL did not answer, or not with what was expected."""


def send(url: str, *, body: bytes | None = None, timeout: float = TIMEOUT) -> bytes:
    """GET `url` (POST `body` as JSON when given): the answer's bytes, or `Unreachable` naming the URL and why
    (a refused POST says what the server answered: Alertmanager names the field it rejects)."""
    where = url.split("?", 1)[0]
    headers = {"Content-Type": "application/json"} if body is not None else {}
    request = urllib.request.Request(url, data=body, method="GET" if body is None else "POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as e:
        detail = e.reason if body is None else e.read()[:200].decode("utf-8", "replace")
        raise Unreachable(f"{where}: HTTP {e.code} {detail}") from e
    except (urllib.error.URLError, OSError) as e:
        raise Unreachable(f"{where}: {getattr(e, 'reason', e)}") from e


def get_json(url: str, *, timeout: float = TIMEOUT) -> Any:
    try:
        return json.loads(send(url, timeout=timeout))
    except ValueError as e:
        raise Unreachable(f"{url.split('?', 1)[0]}: {e}") from e


def prometheus_query(base: str, expr: str) -> list[dict[str, Any]]:
    """An instant query's result vector."""
    body = get_json(f"{base.rstrip('/')}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    if not isinstance(body, dict) or body.get("status") != "success":
        raise Unreachable(f"{base}: query {expr!r} failed: {body.get('error') if isinstance(body, dict) else body}")
    return list(body["data"]["result"])


def post_status(url: str, *, token: str | None = None, timeout: float = TIMEOUT) -> int:
    """POST an empty JSON object, without credentials or with the bearer `token`; the HTTP status it gets (the
    webhook's door test)."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=b"{}", method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, OSError) as e:
        raise Unreachable(f"{url}: {getattr(e, 'reason', e)}") from e
