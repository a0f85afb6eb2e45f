"""Installing CustomResourceDefinitions and waiting until the API server serves them."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from kubernetes import client

from rebalancer_lab.manifests import crds


def install_crds(
    api_client: client.ApiClient,
    bodies: Iterable[dict[str, Any]] | None = None,
    timeout: float = 60.0,
) -> None:
    """Create each CRD (the project's by default) and wait until its resources can be listed.

    A CRD that is there already is kept (a cluster may be shared by tests, or installed by helm
    before). Established is not enough: discovery and the resource's storage come a moment later,
    and a client that creates an object then may get a 404.
    """
    wanted = list(crds() if bodies is None else bodies)
    extensions = client.ApiextensionsV1Api(api_client)
    for body in wanted:
        try:
            extensions.create_custom_resource_definition(body, _preload_content=False)
        except client.ApiException as error:
            if error.status != 409:
                raise
    for body in wanted:
        _wait_until_served(api_client, body, timeout)


def _wait_until_served(api_client: client.ApiClient, crd: dict[str, Any], timeout: float) -> None:
    spec = crd["spec"]
    group, plural = spec["group"], spec["names"]["plural"]
    version = next(v["name"] for v in spec["versions"] if v.get("served", True))
    objects = client.CustomObjectsApi(api_client)
    deadline = time.monotonic() + timeout
    while True:
        try:
            objects.list_cluster_custom_object(group, version, plural, limit=1)
            return
        except client.ApiException as error:
            if error.status != 404 or time.monotonic() > deadline:
                raise RuntimeError(
                    f"CRD {plural}.{group} is not served after {timeout:.0f} s: "
                    f"HTTP {error.status} {error.reason}"
                ) from None
        time.sleep(0.1)
