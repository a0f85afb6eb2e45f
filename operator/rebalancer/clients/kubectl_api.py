"""The kubectl plugin's calls to the API server, as the user kubectl would be.

The configuration is kubectl's: `--kubeconfig`, else `$KUBECONFIG` (a list of files, merged),
else `~/.kube/config`; `--context`, else the current context; the namespace from `-n`, else the
context's, else `default`. Inside a pod without a kubeconfig, the pod's ServiceAccount and
namespace, as kubectl does there. Answers are plain JSON objects (what `kubectl get -o json`
prints); failures are KubectlApiError with the API server's message, never a client type.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from rebalancer import __version__
from rebalancer.structs.consumer_group import GROUP, KIND, PLURAL, VERSION
from rebalancer.structs.errors import RebalancerError

# The user agent names the writer of each field in metadata.managedFields: this plugin's
# writes are the user's, not the operator's.
USER_AGENT = f"kubectl-rebalancer/{__version__}"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
REQUEST_TIMEOUT = (10.0, 30.0)
MERGE_PATCH = "application/merge-patch+json"
Body = dict[str, Any]


class KubectlApiError(RebalancerError, RuntimeError):
    """A call the API server refused or could not answer; `status` is its HTTP status (0 when
    there was no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class KubectlApi:
    custom: client.CustomObjectsApi
    core: client.CoreV1Api
    api_client: client.ApiClient
    # The namespace kubectl would use without -n.
    default_namespace: str

    def close(self) -> None:
        self.api_client.close()

    def list_groups(self, namespace: str | None) -> list[Body]:
        """ConsumerGroups of `namespace`, or of every namespace when None."""
        with _failures("list consumergroups"):
            if namespace is None:
                answer = self.custom.list_cluster_custom_object(
                    GROUP, VERSION, PLURAL, _request_timeout=REQUEST_TIMEOUT
                )
            else:
                answer = self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, _request_timeout=REQUEST_TIMEOUT
                )
        return [item for item in answer.get("items") or [] if isinstance(item, dict)]

    def read_group(self, namespace: str, name: str) -> Body:
        with _failures(f"get consumergroup {name} in namespace {namespace}"):
            body = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=REQUEST_TIMEOUT
            )
        return dict(body)

    def patch_group(self, namespace: str, name: str, patch: Body) -> Body:
        """A JSON merge patch of the ConsumerGroup (spec and metadata, never status)."""
        with _failures(f"patch consumergroup {name} in namespace {namespace}"):
            body = self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                patch,
                _content_type=MERGE_PATCH,
                _request_timeout=REQUEST_TIMEOUT,
            )
        return dict(body)

    def group_events(self, namespace: str, name: str) -> list[Body]:
        """The Events whose involved object is the ConsumerGroup `name`, as JSON objects."""
        selector = f"involvedObject.kind={KIND},involvedObject.name={name}"
        with _failures(f"list events of consumergroup {name} in namespace {namespace}"):
            answer = self.core.list_namespaced_event(
                namespace, field_selector=selector, _request_timeout=REQUEST_TIMEOUT
            )
        items = self.api_client.sanitize_for_serialization(answer).get("items") or []
        return [item for item in items if isinstance(item, dict)]


@contextmanager
def _failures(doing: str) -> Iterator[None]:
    """Turns the client's errors into KubectlApiError naming what was being done."""
    try:
        yield
    except ApiException as error:
        raise KubectlApiError(f"cannot {doing}: {_reason(error)}", int(error.status or 0)) from None
    except (OSError, urllib3.exceptions.HTTPError) as error:
        raise KubectlApiError(f"cannot {doing}: {error}") from None


def _reason(error: ApiException) -> str:
    try:
        status = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        status = {}
    message = status.get("message") if isinstance(status, dict) else None
    return str(message or error.reason or f"HTTP {error.status}")


def _context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
    chosen = current
    if context is not None:
        chosen = next((item for item in contexts if item.get("name") == context), None)
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return namespace if isinstance(namespace, str) and namespace else None


def connect(kubeconfig: str | None, context: str | None) -> KubectlApi:
    """A client configured as kubectl would be with these flags."""
    configuration = client.Configuration()
    default_location = os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)
    has_file = kubeconfig is not None or any(
        os.path.exists(path) for path in default_location.split(os.pathsep) if path
    )
    try:
        if not has_file and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
            try:
                namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
            except OSError:
                namespace = "default"
        else:
            config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
            namespace = _context_namespace(kubeconfig, context) or "default"
    except (ConfigException, OSError) as error:
        raise KubectlApiError(f"cannot load the kubeconfig: {error}") from None
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return KubectlApi(
        custom=client.CustomObjectsApi(api_client),
        core=client.CoreV1Api(api_client),
        api_client=api_client,
        default_namespace=namespace,
    )
