"""The HTTP face of the emulator: kube-apiserver's routes, content negotiation and errors."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from multidict import CIMultiDict

from . import discovery, errors, protobuf, tables
from .cluster import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_PATCH,
    Cluster,
    Outcome,
    WriteOptions,
)
from .errors import ApiError
from .faults import Faults
from .kubeconfig import write_kubeconfig
from .openapi import OpenAPICache
from .resources import ResourceType
from .watching import Watch, WatchRequest, parse_since

Body = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
logger = logging.getLogger(__name__)

PATCH_TYPES = (MERGE_PATCH, JSON_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def _dumps(body: Any) -> str:
    return json.dumps(body, separators=(",", ":"))


def respond(
    body: Any,
    status: int = 200,
    warnings: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    out: CIMultiDict[str] = CIMultiDict({"Content-Type": "application/json"})
    for key, value in (headers or {}).items():
        out[key] = value
    for warning in warnings or ():
        out.add("Warning", f"299 - {json.dumps(warning)}")
    return web.Response(body=_dumps(body).encode(), status=status, headers=out)


def _media(accept: str) -> list[dict[str, str]]:
    found = []
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        params = dict(p.split("=", 1) for p in pieces[1:] if "=" in p)
        params["type"] = pieces[0]
        found.append(params)
    return found


def _wanted_form(request: web.Request) -> tuple[str, str] | None:
    """('Table'|'PartialObjectMetadata'|..., apiVersion) when the Accept header asks for one."""
    for media in _media(request.headers.get("Accept", "")):
        if media.get("g") == "meta.k8s.io" and media.get("as"):
            return media["as"], f"meta.k8s.io/{media.get('v', 'v1')}"
        if media["type"] in ("application/json", "*/*", "application/yaml"):
            return None
    return None


@dataclass
class Target:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool


class ApiServer:
    """A kube-apiserver emulator on aiohttp; one instance is one in-memory cluster."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        history_limit: int = 10_000,
        bookmark_interval: float = 60.0,
        event_ttl: float = 3600.0,
    ) -> None:
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.cluster = Cluster(history_limit=history_limit, event_ttl=event_ttl)
        self.faults = Faults()
        self.openapi = OpenAPICache(self.cluster.registry)
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.faults.on_drop(self._request_drop)

    # Lifecycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._runner is None:
            raise RuntimeError("the API server is not started")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # Cancelling handlers of gone clients ends abandoned watches at once, so their
        # subscriptions cannot pile up on resources that never change.
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
            handler_cancellation=True,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        self._drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        return write_kubeconfig(path, self.url, namespace)

    def _request_drop(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._drop_watches)

    def _drop_watches(self) -> None:
        # Every subscription is an open watch stream; closing it ends the stream.
        for sub in self.cluster.store.subscriptions():
            sub.close()

    # Middleware -------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith("/_emulator/"):
            fault = self.faults.take(request.method, request.path)
            if fault is not None:
                exc = errors.generic(fault.status, fault.message, fault.retry_after)
                return respond(exc.status(), exc.code, headers=exc.headers)
        try:
            return await handler(request)
        except ApiError as exc:
            return respond(exc.status(), exc.code, headers=exc.headers)
        except web.HTTPException:
            raise
        except Exception as exc:
            logger.exception("the API emulator failed on %s %s", request.method, request.path_qs)
            failure = errors.internal(f"{type(exc).__name__}: {exc}")
            return respond(failure.status(), 500)

    # Routing ----------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"].strip("/")
        parts = [p for p in path.split("/") if p]
        if path.startswith("/_emulator/"):
            return await self._admin(request, parts[1:])
        if request.method == "GET":
            simple = self._simple_get(request, path, parts)
            if simple is not None:
                return simple
        target = self._target(parts)
        if target is None:
            raise errors.no_such_route()
        return await self._resource(request, target)

    def _simple_get(
        self, request: web.Request, path: str, parts: list[str]
    ) -> web.StreamResponse | None:
        registry = self.cluster.registry
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if path == "/version":
            return respond(discovery.VERSION)
        if path in ("/api", "/apis"):
            version = discovery.aggregated_version(request.headers.get("Accept", ""))
            if version:
                body = discovery.aggregated(registry, path == "/api", version)
                media = (
                    f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
                )
                return web.Response(body=_dumps(body).encode(), headers={"Content-Type": media})
            if path == "/api":
                return respond(discovery.api_versions(f"{self.host}:{self.port}"))
            return respond(discovery.api_group_list(registry))
        if path == "/openapi/v2":
            raise errors.no_such_route()
        if path == "/openapi/v3":
            return respond(self.openapi.root())
        if path.startswith("/openapi/v3/"):
            doc = self.openapi.document(path[len("/openapi/v3/") :])
            if doc is None:
                raise errors.no_such_route()
            return web.Response(body=doc, headers={"Content-Type": "application/json"})
        if parts[:1] == ["api"] and len(parts) == 2:
            found = discovery.resource_list(registry, "", parts[1])
            if found is None:
                raise errors.no_such_route()
            return respond(found)
        if parts[:1] == ["apis"] and len(parts) == 2:
            group = discovery.api_group(registry, parts[1])
            if group is None:
                raise errors.no_such_route()
            return respond(group)
        if parts[:1] == ["apis"] and len(parts) == 3:
            found = discovery.resource_list(registry, parts[1], parts[2])
            if found is None:
                raise errors.no_such_route()
            return respond(found)
        return None

    def _target(self, parts: list[str]) -> Target | None:
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        watch_path = rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        registry = self.cluster.registry
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            inner = registry.get(group, version, rest[2])
            if inner is not None and inner.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None
        rtype = registry.get(group, version, rest[0])
        if rtype is None:
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and not (
            (sub == "status" and rtype.status) or (sub == "scale" and rtype.scale is not None)
        ):
            return None
        return Target(rtype, namespace, name, sub, watch_path)

    # Resources --------------------------------------------------------------------------

    @staticmethod
    def _options(request: web.Request) -> WriteOptions:
        query = request.query
        validation = query.get("fieldValidation", "Warn") or "Warn"
        if validation not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(
                f"fieldValidation parameter unsupported: {validation}. "
                'Must be one of "Strict", "Warn", or "Ignore"'
            )
        dry_run = query.getall("dryRun", [])
        if any(v != "All" for v in dry_run):
            raise errors.bad_request(f"Invalid dry run value: {dry_run}")
        return WriteOptions(
            dry_run=bool(dry_run),
            field_validation=validation,
            field_manager=query.get("fieldManager", ""),
            force=query.get("force", "") == "true",
        )

    @staticmethod
    async def _body(request: web.Request, *, required: bool = True) -> Any:
        raw = await request.read()
        if not raw.strip():
            if required:
                raise errors.bad_request("the request body is empty")
            return None
        content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
        if content_type == "application/vnd.kubernetes.protobuf":
            return protobuf.decode(raw)
        if "protobuf" in content_type or "cbor" in content_type:
            raise errors.unsupported_media_type(["application/json", "application/yaml"])
        try:
            if "yaml" in content_type:
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc

    def _check_verb(self, rtype: ResourceType, verb: str) -> None:
        if verb not in rtype.verbs:
            raise errors.method_not_allowed()

    async def _resource(self, request: web.Request, target: Target) -> web.StreamResponse:
        cluster = self.cluster
        rtype, ns, name, sub = target.rtype, target.namespace, target.name, target.subresource
        method = request.method
        query = request.query
        if method == "GET":
            watching = target.watch_path or query.get("watch", "") in ("true", "1")
            if watching and sub is None:
                self._check_verb(rtype, "watch")
                return await self._watch(request, target)
            if name is None:
                self._check_verb(rtype, "list")
                return self._list(request, rtype, ns)
            self._check_verb(rtype, "get")
            if sub == "scale":
                return respond(cluster.get_scale(rtype, ns, name))
            return self._render(request, rtype, cluster.get(rtype, ns, name))
        if method == "POST" and name is None:
            self._check_verb(rtype, "create")
            outcome = cluster.create(rtype, ns, await self._body(request), self._options(request))
            return self._outcome(request, rtype, outcome)
        if method == "PUT" and name is not None:
            self._check_verb(rtype, "update")
            body = await self._body(request)
            if sub == "scale":
                return respond(cluster.update_scale(rtype, ns, name, body, self._options(request)))
            return self._outcome(
                request, rtype, cluster.update(rtype, ns, name, body, self._options(request), sub)
            )
        if method == "PATCH" and name is not None:
            self._check_verb(rtype, "patch")
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            if content_type not in PATCH_TYPES:
                raise errors.unsupported_media_type(
                    [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH]
                )
            raw = await request.read()
            try:
                body = yaml.safe_load(raw) if content_type == APPLY_PATCH else json.loads(raw)
            except (ValueError, yaml.YAMLError) as exc:
                raise errors.bad_request(f"error decoding patch: {exc}") from exc
            opts = self._options(request)
            if sub == "scale":
                return respond(self._patch_scale(rtype, ns, name, content_type, body, opts))
            return self._outcome(
                request, rtype, cluster.patch(rtype, ns, name, content_type, body, opts, sub)
            )
        if method == "DELETE" and sub is None:
            opts = self._options(request)
            if name is None:
                self._check_verb(rtype, "deletecollection")
                return respond(
                    cluster.delete_collection(
                        rtype, ns, query.get("labelSelector"), query.get("fieldSelector"), opts
                    )
                )
            self._check_verb(rtype, "delete")
            body = await self._body(request, required=False)
            return self._outcome(request, rtype, cluster.delete(rtype, ns, name, body, opts))
        raise errors.method_not_allowed()

    def _patch_scale(
        self,
        rtype: ResourceType,
        ns: str | None,
        name: str,
        content_type: str,
        body: Any,
        opts: WriteOptions,
    ) -> Body:
        from . import patching

        scale = self.cluster.get_scale(rtype, ns, name)
        if content_type == JSON_PATCH:
            scale = patching.json_patch(scale, body)
        else:
            scale = patching.merge_patch(scale, body)
        return self.cluster.update_scale(rtype, ns, name, scale, opts)

    def _outcome(self, request: web.Request, rtype: ResourceType, outcome: Outcome) -> web.Response:
        return self._render(request, rtype, outcome.obj, outcome.code, outcome.warnings)

    def _render(
        self,
        request: web.Request,
        rtype: ResourceType,
        obj: Body,
        status: int = 200,
        warnings: list[str] | None = None,
    ) -> web.Response:
        form = _wanted_form(request)
        if form is not None and obj.get("kind") != "Status":
            kind, api_version = form
            if kind == "Table":
                include = request.query.get("includeObject", "Metadata")
                meta = {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")}
                table = tables.table(rtype, [obj], meta, include)
                table["apiVersion"] = api_version
                return respond(table, status, warnings)
            if kind.startswith("PartialObjectMetadata"):
                return respond(
                    {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": api_version,
                        "metadata": obj.get("metadata", {}),
                    },
                    status,
                    warnings,
                )
        return respond(obj, status, warnings)

    def _list(self, request: web.Request, rtype: ResourceType, ns: str | None) -> web.Response:
        query = request.query
        try:
            limit = int(query.get("limit", "0") or 0)
        except ValueError as exc:
            raise errors.bad_request(f"invalid limit: {query.get('limit')}") from exc
        items, meta = self.cluster.list_page(
            rtype,
            ns,
            query.get("labelSelector"),
            query.get("fieldSelector"),
            limit,
            query.get("continue"),
        )
        form = _wanted_form(request)
        if form is not None:
            kind, api_version = form
            if kind == "Table":
                table = tables.table(rtype, items, meta, query.get("includeObject", "Metadata"))
                table["apiVersion"] = api_version
                return respond(table)
            if kind.startswith("PartialObjectMetadata"):
                partial = [
                    {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": api_version,
                        "metadata": o.get("metadata", {}),
                    }
                    for o in items
                ]
                return respond(
                    {
                        "kind": "PartialObjectMetadataList",
                        "apiVersion": api_version,
                        "metadata": meta,
                        "items": partial,
                    }
                )
        return respond(
            {
                "kind": rtype.list_kind,
                "apiVersion": rtype.api_version,
                "metadata": meta,
                "items": items,
            }
        )

    async def _watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        query = request.query
        field_selector = query.get("fieldSelector")
        if target.name is not None:
            by_name = f"metadata.name={target.name}"
            field_selector = f"{field_selector},{by_name}" if field_selector else by_name
        try:
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        except ValueError as exc:
            raise errors.bad_request(f"invalid timeoutSeconds: {query['timeoutSeconds']}") from exc
        form = _wanted_form(request)
        watch_request = WatchRequest(
            rtype=target.rtype,
            namespace=target.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=field_selector,
            since=parse_since(query.get("resourceVersion")),
            send_initial_events=query.get("sendInitialEvents") == "true",
            bookmarks=query.get("allowWatchBookmarks") in ("true", "1"),
            timeout=timeout,
            table=form[1] if form and form[0] == "Table" else None,
            include_object=query.get("includeObject", "Metadata"),
        )
        if watch_request.send_initial_events:
            watch_request.since = None
        watch = Watch(self.cluster, watch_request, self.bookmark_interval)
        return await watch.serve(request)

    # Admin ------------------------------------------------------------------------------

    async def _admin(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        if parts == ["faults"]:
            if request.method == "GET":
                return respond([f.describe() for f in self.faults.active()])
            if request.method == "DELETE":
                self.faults.clear()
                return respond({"cleared": True})
            if request.method == "POST":
                spec = await request.json()
                fault = self.faults.inject(
                    status=int(spec.get("status", 500)),
                    method=spec.get("method"),
                    path_regex=spec.get("path_regex"),
                    times=spec.get("times", 1),
                    message=str(spec.get("message", "")),
                    retry_after=spec.get("retry_after"),
                )
                return respond(fault.describe(), 201)
        if parts == ["drop-watches"] and request.method == "POST":
            count = len(self.cluster.store.subscriptions())
            self._drop_watches()
            return respond({"dropped": count})
        raise errors.no_such_route()


async def serve(host: str, port: int, kubeconfig: Path | None) -> None:
    """Run an emulator until cancelled, optionally writing a kubeconfig for it first."""
    server = ApiServer(host=host, port=port)
    await server.start()
    try:
        if kubeconfig is not None:
            server.write_kubeconfig(kubeconfig)
        logger.info("Kubernetes API emulator listening on %s", server.url)
        await asyncio.Event().wait()
    finally:
        await server.stop()
