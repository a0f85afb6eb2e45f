"""API discovery: the legacy documents and kubectl's aggregated (apidiscovery.k8s.io) form."""

from __future__ import annotations

from typing import Any

from .resources import STATUS_VERBS, Registry, ResourceType

Body = dict[str, Any]

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-rebalancer-lab",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T00:00:00Z",
    "goVersion": "go1.23.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def aggregated_version(accept: str) -> str | None:
    """The apidiscovery version an Accept header asks for first, if any."""
    for media in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in media.split(";")[1:] if "=" in p)
        if params.get("as") == "APIGroupDiscoveryList" and params.get("g") == "apidiscovery.k8s.io":
            if params.get("v") in ("v2", "v2beta1"):
                return params["v"]
        elif media.split(";")[0].strip() in ("application/json", "*/*"):
            return None
    return None


def api_versions(server_address: str) -> Body:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_versions(registry: Registry, group: str) -> tuple[list[Body], Body]:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in registry.versions(group)]
    return versions, versions[0]


def api_group(registry: Registry, group: str) -> Body | None:
    if not group or not registry.versions(group):
        return None
    versions, preferred = _group_versions(registry, group)
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": preferred,
    }


def api_group_list(registry: Registry) -> Body:
    groups = []
    for group, _ in registry.groups():
        if group:
            versions, preferred = _group_versions(registry, group)
            groups.append({"name": group, "versions": versions, "preferredVersion": preferred})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource(rtype: ResourceType) -> Body:
    entry: Body = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": list(rtype.verbs),
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    return entry


def resource_list(registry: Registry, group: str, version: str) -> Body | None:
    rtypes = registry.in_version(group, version)
    if not rtypes:
        return None
    resources = []
    for rtype in sorted(rtypes, key=lambda t: t.plural):
        resources.append(_resource(rtype))
        common = {"singularName": "", "namespaced": rtype.namespaced, "verbs": list(STATUS_VERBS)}
        if rtype.status:
            resources.append({"name": f"{rtype.plural}/status", "kind": rtype.kind, **common})
        if rtype.scale is not None:
            resources.append(
                {
                    "name": f"{rtype.plural}/scale",
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    **common,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _aggregated_resource(rtype: ResourceType) -> Body:
    entry: Body = {
        "resource": rtype.plural,
        "responseKind": {"group": rtype.group, "version": rtype.version, "kind": rtype.kind},
        "scope": "Namespaced" if rtype.namespaced else "Cluster",
        "singularResource": rtype.singular,
        "verbs": list(rtype.verbs),
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    subresources = []
    if rtype.status:
        subresources.append(
            {
                "subresource": "status",
                "responseKind": entry["responseKind"],
                "verbs": list(STATUS_VERBS),
            }
        )
    if rtype.scale is not None:
        subresources.append(
            {
                "subresource": "scale",
                "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                "verbs": list(STATUS_VERBS),
            }
        )
    if subresources:
        entry["subresources"] = subresources
    return entry


def aggregated(registry: Registry, legacy: bool, version: str) -> Body:
    """APIGroupDiscoveryList for /api (legacy=True) or /apis, versions in preferred order."""
    items = []
    for group, versions in registry.groups():
        if bool(group) == legacy:
            continue
        items.append(
            {
                "metadata": {"name": group} if group else {},
                "versions": [
                    {
                        "version": v,
                        "resources": [
                            _aggregated_resource(t)
                            for t in sorted(registry.in_version(group, v), key=lambda t: t.plural)
                        ],
                        "freshness": "Current",
                    }
                    for v in versions
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }
