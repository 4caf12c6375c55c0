"""One request by path through the official client's `ApiClient`: its configuration, credentials, TLS and
connection pool, and its `ApiException` for a status that is not 2xx — without the generated API classes.

The generated methods (`AppsV1Api.read_namespaced_deployment`, …) would only build the same path and headers
here: the gateway asks for raw JSON anyway (it reads a handful of fields, and the watch cache trims objects as it
decodes them). Importing them loads the client's model classes (some 340 modules, about 32 MB of the worker's
memory), and every call validates its arguments with pydantic. A body is sent as the JSON given, byte for byte
what the reactor built or read: a Lease's MicroTime keeps its fraction (the client's V1Lease model would rewrite
it, see `KubeGateway.update_lease`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kubernetes.client.exceptions import ApiException

Send = Callable[..., Any]  # send(*, _preload_content=False, _request_timeout=...) -> the response


class Rest:
    """Builds the `send` callables the gateway's `_call` and `_open` run (with their limits and retries)."""

    def __init__(self, client: Any) -> None:
        self._client = client  # kubernetes.client.ApiClient

    def send(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), body: Any = None,
             content_type: str | None = None, unsent: Sequence[str] = ()) -> Send:
        """`method` on `path` with `query`; `body` as JSON (`content_type`, e.g. a patch's, else JSON). `unsent`: the
        client's default headers this one request goes without (its own credentials, not whom the client
        impersonates), left out of this request's headers rather than lifted from the client other threads share."""
        client = self._client
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"

        def send(*, _preload_content: bool = False, _request_timeout: Any = None) -> Any:
            request = client.param_serialize(method, path, query_params=list(query), header_params=dict(headers),
                                             body=body, auth_settings=["BearerToken"])
            for name in unsent:
                request[2].pop(name, None)  # (method, url, headers, body, post_params): this request's own headers
            response = client.call_api(*request, _request_timeout=_request_timeout)
            if not 200 <= response.status <= 299:
                response.read()
                raise ApiException.from_response(http_resp=response, body=None, data=None)
            if _preload_content:
                response.read()
                return response
            return response.response  # the urllib3 response: `.data` reads it whole, a watch reads it as it comes
        return send
