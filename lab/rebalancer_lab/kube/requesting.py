"""JSON over HTTP through the official client's REST layer, as controllers and kubelets talk.

The typed API classes turn every body into pydantic models and back, which is slow and drops
nothing we need; the lab's control loops work on plain dicts, so they serialize and send them
with the same ApiClient (its configuration, authentication and connection pool) instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client, config

Body = dict[str, Any]
logger = logging.getLogger(__name__)

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class ApiUnreachable(ConnectionError):
    """No answer from the API server (refused, reset, timed out)."""


class RequestFailed(Exception):
    """A non-2xx answer, with kube's Status reason and message when the server sent one."""

    def __init__(self, status: int, reason: str, message: str, body: Body | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


def resource_path(
    api_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """`/api/v1/namespaces/ns/pods/name/status` and its apps/v1, cluster-wide and list forms."""
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = root
    if namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{plural}"
    if name:
        path += f"/{quote(name, safe='')}"
        if subresource:
            path += f"/{subresource}"
    return path


def configuration_for(target: str | Path | Any) -> Any:
    """A client Configuration from an API URL, a kubeconfig path or a Configuration."""
    if isinstance(target, client.Configuration):
        return target
    text = str(target)
    configuration = client.Configuration()
    if text.startswith(("http://", "https://")):
        configuration.host = text.rstrip("/")
        return configuration
    config.load_kube_config(config_file=text, client_configuration=configuration)
    return configuration


@dataclass
class WatchStream:
    """One open watch request; `close()` from any thread ends the iteration."""

    response: Any
    _closed: bool = False

    def __iter__(self) -> Iterator[tuple[str, Body]]:
        buffer = b""
        try:
            for chunk in self.response.stream(amt=None, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        event = json.loads(line)
                        yield str(event.get("type")), event.get("object") or {}
        except Exception:
            if not self._closed:
                raise
        finally:
            self.release()

    def close(self) -> None:
        self._closed = True
        # shutdown() unblocks a read in progress on another thread; close() alone would not.
        with contextlib.suppress(Exception):
            self.response.shutdown()
        self.release()

    def release(self) -> None:
        with contextlib.suppress(Exception):
            self.response.release_conn()


class Api:
    """The handful of verbs the lab's controllers and kubelet need, on plain dicts."""

    def __init__(self, api_client: Any) -> None:
        self.client = api_client
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, target: str | Path | Any) -> Api:
        configuration = configuration_for(target)
        # Every informer holds a connection for its watch, and workers write concurrently.
        configuration.connection_pool_maxsize = max(
            int(configuration.connection_pool_maxsize or 0), 32
        )
        return cls(client.ApiClient(configuration))

    def close(self) -> None:
        self.client.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: Any = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        method, url, headers, body, _ = self.client.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            return self.client.call_api(
                method, url, header_params=headers, body=body, _request_timeout=timeout
            )
        except urllib3.exceptions.HTTPError as exc:
            raise ApiUnreachable(f"{method} {path}: {exc}") from exc

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float = 30.0,
    ) -> Body:
        response = self._send(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        data = response.read()
        if not 200 <= response.status <= 299:
            # An error need not be a Status object: a server starting or a proxy in front of it
            # may answer plain text, which must fail as the status it is, not as bad JSON.
            try:
                parsed: Any = json.loads(data) if data else {}
            except ValueError:
                text = data.decode(errors="replace").strip()[:300]
                parsed = {"message": text}
            raise _failure(response.status, parsed)
        parsed = json.loads(data) if data else {}
        return parsed if isinstance(parsed, dict) else {"value": parsed}

    def get(self, path: str) -> Body | None:
        try:
            return self.request("GET", path)
        except RequestFailed as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, path: str, **query: Any) -> Body:
        return self.request("GET", path, query=query)

    def create(self, path: str, body: Body) -> Body:
        return self.request("POST", path, body=body)

    def replace(self, path: str, body: Body) -> Body:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any, content_type: str = MERGE) -> Body:
        return self.request("PATCH", path, body=body, content_type=content_type)

    def delete(
        self,
        path: str,
        *,
        grace_period_seconds: int | None = None,
        propagation: str | None = "Background",
        uid: str | None = None,
    ) -> Body | None:
        """DELETE with kube's DeleteOptions; None when the object was already gone."""
        options: Body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation is not None:
            options["propagationPolicy"] = propagation
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        try:
            return self.request("DELETE", path, body=options)
        except RequestFailed as exc:
            if exc.status == 404:
                return None
            raise

    def watch(
        self, path: str, resource_version: str, *, timeout_seconds: int = 300, **query: Any
    ) -> WatchStream:
        params = {
            **query,
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        # No read timeout: the server ends the watch after timeout_seconds, and close() ends
        # it early.
        response = self._send("GET", path, query=params, timeout=(10.0, None))
        if not 200 <= response.status <= 299:
            data = response.read()
            raise _failure(response.status, json.loads(data) if data else {})
        return WatchStream(response.response)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _failure(status: int, body: Any) -> RequestFailed:
    body = body if isinstance(body, dict) else {}
    return RequestFailed(
        status, str(body.get("reason") or ""), str(body.get("message") or ""), body
    )
