"""The operator's one Kubernetes client, configured once at startup."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ForbiddenException

from rebalancer import __version__, metrics
from rebalancer.planning.permissions import Denial, account_from_status, denial_from_request
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.workloads import FIELD_MANAGER


@dataclass
class KubernetesApi:
    core: client.CoreV1Api
    apps: client.AppsV1Api
    custom: client.CustomObjectsApi
    api_client: client.ApiClient

    def close(self) -> None:
        self.api_client.close()


# (connect, read) seconds for every request that does not set its own. The client's default is
# none: a request that reached an API server while it restarted could then wait forever, and
# the handler or daemon that made it with it (a rollout stalled that way in
# tests/operator/reliability/test_control_plane_faults.py). The operator makes no streaming requests
# through this client (kopf watches with its own), so no answer takes a minute.
REQUEST_TIMEOUT = (10.0, 60.0)


class PermissionDenied(ForbiddenException, RebalancerError):  # type: ignore[misc]
    """A 403 from the API server, told as the permission the operator lacks (`denial`).

    Still an ApiException with status 403, so code that looks at statuses keeps working; its
    text is the denial's message (verb, resource, namespace and the fix), never the response.
    """

    def __init__(self, denial: Denial, response: Any = None) -> None:
        # The API exception's constructor, as before: to mypy, super() is RebalancerError's.
        ForbiddenException.__init__(self, http_resp=response)
        self.denial = denial

    def __str__(self) -> str:
        return self.denial.message()


def _refusal(method: str, url: str, response: Any) -> PermissionDenied:
    response.read()
    try:
        status = json.loads(response.data or b"{}")
    except ValueError:
        status = {}
    message = status.get("message") if isinstance(status, dict) else None
    account = account_from_status(message if isinstance(message, str) else None)
    return PermissionDenied(denial_from_request(method, url, account), response)


# The resources the operator's client asks for: anything else is counted as "other", so the
# request counter's resource label stays a small fixed set.
COUNTED_RESOURCES = frozenset(
    {
        "consumergroups",
        "statefulsets",
        "deployments",
        "replicasets",
        "pods",
        "events",
        "secrets",
        "configmaps",
        "leases",
        "namespaces",
        "clusterkopfpeerings",
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
        "validatingwebhookconfigurations",
        "horizontalpodautoscalers",
        "scaledobjects",
        "kafkas",
    }
)


def request_resource(url: str) -> str:
    """The resource a request is about ("consumergroups/status", "statefulsets"), read from its
    URL path (/api/v1/..., /apis/<group>/<version>/..., namespaced or not); "other" for one
    not in COUNTED_RESOURCES."""
    path = url.split("://", 1)[-1].split("?", 1)[0]
    parts = [part for part in path.split("/") if part]
    if "://" in url:
        parts = parts[1:]  # the host
    if parts[:1] == ["api"]:
        parts = parts[2:]
    elif parts[:1] == ["apis"]:
        parts = parts[3:]
    if len(parts) >= 3 and parts[0] == "namespaces":
        parts = parts[2:]
    if not parts or parts[0] not in COUNTED_RESOURCES:
        return "other"
    # <resource>/<name>/<subresource>: status, scale.
    return f"{parts[0]}/{parts[2]}" if len(parts) >= 3 else parts[0]


class TimedApiClient(client.ApiClient):  # type: ignore[misc]
    """An ApiClient whose requests time out unless they say otherwise, and whose 403s are
    PermissionDenied errors that name the permission (read from the request, so the same for
    every call site)."""

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        # rebalancer_kubernetes_requests_total: what each reconcile costs kube-apiserver.
        metrics.record_kubernetes_request(method, request_resource(url))
        response = super().call_api(
            method,
            url,
            header_params=header_params,
            body=body,
            post_params=post_params,
            _request_timeout=_request_timeout or REQUEST_TIMEOUT,
        )
        if getattr(response, "status", None) == 403:
            raise _refusal(method, url, response)
        return response


def connect(kubeconfig: Path | None, context: str | None = None) -> KubernetesApi:
    """In-cluster config inside a pod, else the given or default kubeconfig."""
    configuration = client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(
            config_file=str(kubeconfig) if kubeconfig else None,
            context=context,
            client_configuration=configuration,
        )
    api_client = TimedApiClient(configuration)
    # The API server names the writer of each field after the user agent's first word
    # (metadata.managedFields): the rollout planner tells its own partition from one
    # another writer set by it.
    api_client.user_agent = f"{FIELD_MANAGER}/{__version__}"
    return KubernetesApi(
        core=client.CoreV1Api(api_client),
        apps=client.AppsV1Api(api_client),
        custom=client.CustomObjectsApi(api_client),
        api_client=api_client,
    )


@dataclass(frozen=True)
class ConnectionDetails:
    """What kopf needs to log in, taken from the same configuration the client uses."""

    server: str
    ca_path: str | None
    insecure: bool
    token: str | None
    certificate_path: str | None
    private_key_path: str | None


def connection_details(api: KubernetesApi) -> ConnectionDetails:
    configuration = api.api_client.configuration
    token = None
    authorization = (configuration.api_key or {}).get("authorization") or (
        configuration.api_key or {}
    ).get("BearerToken")
    if authorization:
        token = str(authorization).removeprefix("Bearer ").strip()
    return ConnectionDetails(
        server=str(configuration.host),
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        token=token,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )
