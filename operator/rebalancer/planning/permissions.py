"""What the Kubernetes API refused the operator, said so that a reader can grant it (pure).

A 403 names a user and a resource in the API server's words; what a user of the operator needs
is the verb, the resource and the namespace to grant, and where the chart grants it. The
message is built from the request (method and path) and the identity the API server reports,
never from a request or response body, so that no Secret value can end up in a log line, an
Event or a status condition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType

REASON = "PermissionDenied"
# A condition's message lists at most this many denials (each is about 250 characters).
MAX_LISTED = 4
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_USER = re.compile(r'User "([^"]+)"')


@dataclass(frozen=True)
class Denial:
    """One permission the operator lacks: `verb` on `resource` of API `group` in `namespace`
    (None: cluster-wide), as `account` (who the API server took the operator for)."""

    verb: str
    resource: str  # the plural, with a subresource after a slash: "consumergroups/status"
    group: str  # "" for the core group
    namespace: str | None
    account: str | None = None

    @property
    def resource_name(self) -> str:
        """As kubectl and RBAC rules name it: "statefulsets.apps", "pods"."""
        base, _, sub = self.resource.partition("/")
        qualified = f"{base}.{self.group}" if self.group else base
        return f"{qualified}/{sub}" if sub else qualified

    @property
    def permission(self) -> str:
        where = f"in namespace {self.namespace}" if self.namespace else "cluster-wide"
        return f"{self.verb} {self.resource_name} {where}"

    def message(self) -> str:
        return f"{_who(self.account)} may not {self.permission}: grant it ({self.fix()})"

    def fix(self) -> str:
        """Where the chart grants it (charts/rebalancer/templates/rbac.yaml), or what to add."""
        rule = f"`{self.verb}` on {self.resource_name}"
        if self.group == "kafka.strimzi.io":
            return f"charts/rebalancer rbac: rbac.strimzi=true; or add {rule} to its ClusterRole"
        if self.namespace is None:
            return f"charts/rebalancer rbac: rbac.create=true; or add {rule} to its ClusterRole"
        return (
            f"charts/rebalancer rbac: rbac.create=true with {self.namespace} in "
            f"operator.watchNamespaces or none listed; or add {rule} to its Role in "
            f"{self.namespace}"
        )


def _who(account: str | None) -> str:
    if account is None:
        return "the operator's ServiceAccount"
    if account.startswith("system:serviceaccount:"):
        return f"the operator's ServiceAccount ({account})"
    return f"the operator's account ({account})"


def account_from_status(message: str | None) -> str | None:
    """The user a 403's Status message names (`User "system:serviceaccount:ns:name"`)."""
    found = _USER.search(message or "")
    return found.group(1) if found else None


def denial_from_request(method: str, url: str, account: str | None = None) -> Denial:
    """The permission a refused request needed, read from its method and URL the way the API
    server's authorizer reads them (verb from the method, list/watch/get from the path)."""
    parts = urlsplit(url)
    segments = [segment for segment in parts.path.split("/") if segment]
    group = ""
    rest: list[str] = []
    if segments[:1] == ["api"]:
        rest = segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 3:
        group, rest = segments[1], segments[3:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else parts.path
    named = len(rest) >= 2
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    verb = _verb(method.upper(), named, parse_qs(parts.query))
    return Denial(verb, resource, group, namespace, account)


def _verb(method: str, named: bool, query: Mapping[str, list[str]]) -> str:
    if method == "GET":
        if named:
            return "get"
        return "watch" if query.get("watch", [""])[0] in ("true", "1") else "list"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return _VERBS.get(method, method.lower())


def denial_conditions(denials: Sequence[Denial]) -> list[Condition]:
    """Degraded while anything the group's reconcile needs is refused ([] when nothing is)."""
    messages = list(dict.fromkeys(denial.message() for denial in denials))
    if not messages:
        return []
    shown = "; ".join(messages[:MAX_LISTED])
    hidden = len(messages) - MAX_LISTED
    if hidden > 0:
        shown += f" (and {hidden} more)"
    return [Condition(ConditionType.DEGRADED, ConditionStatus.TRUE, REASON, shown)]


@dataclass(frozen=True)
class Need:
    """A permission the operator needs whatever a ConsumerGroup asks of it, and why."""

    verb: str
    resource: str
    group: str
    why: str
    cluster_scoped: bool = False


# What kopf does for every ConsumerGroup (and the operator's status writes), checked at start:
# kopf's own requests are retried for about a minute and then only logged, so without this a
# missing grant would show nowhere a user looks. The operator's other requests need grants only
# when a ConsumerGroup asks for the feature; their refusals are reported when they happen.
EVERY_GROUP_NEEDS: tuple[Need, ...] = (
    Need("list", "consumergroups", "rebalancer.dev", "kopf lists ConsumerGroups"),
    Need("watch", "consumergroups", "rebalancer.dev", "kopf watches ConsumerGroups"),
    Need("patch", "consumergroups", "rebalancer.dev", "kopf keeps its progress and finalizer"),
    Need("patch", "consumergroups/status", "rebalancer.dev", "the operator writes status"),
    Need("create", "events", "", "Rebalance, warning and recovery Events"),
)
# What following a kind of workload takes (handlers.workloads), by plural. Checked once at start:
# kopf stops the whole operator when a watch stays refused for a minute, so a kind is followed
# only when both are granted; without them the rollout planner sees a change at its next look.
WORKLOAD_WATCH_NEEDS: dict[str, tuple[Need, ...]] = {
    plural: (
        Need("list", plural, "apps", f"kopf lists {plural} before it watches them"),
        Need("watch", plural, "apps", f"a change to one of the {plural} wakes its planner"),
    )
    for plural in ("statefulsets", "deployments")
}
# kopf's cluster-wide observation: CRDs always, namespaces when given namespaces to watch.
CRD_NEEDS: tuple[Need, ...] = (
    Need("list", "customresourcedefinitions", "apiextensions.k8s.io", "kopf scans CRDs", True),
    Need("watch", "customresourcedefinitions", "apiextensions.k8s.io", "kopf follows CRDs", True),
)
NAMESPACE_NEEDS: tuple[Need, ...] = (
    Need("list", "namespaces", "", "kopf serves the watched namespaces that exist", True),
    Need("watch", "namespaces", "", "kopf serves watched namespaces created later", True),
)


# Leader election (--peering): kopf lists and watches the peering objects; refused, it would
# keep the replica paused and only log it. Its get and patch of the one object are tried at
# start (clients.leading.check_peering), which names a refusal itself.
PEERING_NEEDS: tuple[Need, ...] = (
    Need("list", "clusterkopfpeerings", "kopf.dev", "kopf lists the peering objects", True),
    Need("watch", "clusterkopfpeerings", "kopf.dev", "kopf follows the other replicas", True),
)


def needs(namespaces: Sequence[str], peering: bool = False) -> list[tuple[Need, str | None]]:
    """(need, namespace) pairs to check: "" is every namespace (the operator watches all)."""
    watched = list(namespaces) or [""]
    cluster = [
        *CRD_NEEDS,
        *(NAMESPACE_NEEDS if namespaces else ()),
        *(PEERING_NEEDS if peering else ()),
    ]
    return [(need, None) for need in cluster] + [
        (need, namespace) for namespace in watched for need in EVERY_GROUP_NEEDS
    ]


def workload_watch_needs(plural: str, namespaces: Sequence[str]) -> list[tuple[Need, str | None]]:
    """(need, namespace) pairs to check before following `plural` ("" is every namespace)."""
    return [
        (need, namespace)
        for namespace in list(namespaces) or [""]
        for need in WORKLOAD_WATCH_NEEDS[plural]
    ]


def denial_of(need: Need, namespace: str | None, account: str | None = None) -> Denial:
    """The denial of a need checked in `namespace` ("" checks every namespace: named as
    cluster-wide, which is where the grant then belongs)."""
    return Denial(need.verb, need.resource, need.group, namespace or None, account)


@dataclass
class DenialBook:
    """What the operator has been refused, by ConsumerGroup and kind of work, until that work
    succeeds; and what the start-up check found missing in each namespace ("" for all).

    In memory only: a restarted operator meets each refusal again at its first try."""

    groups: dict[tuple[str, str], dict[str, Denial]] = field(default_factory=dict)
    namespaces: dict[str, tuple[Denial, ...]] = field(default_factory=dict)

    def record(self, namespace: str, name: str, work: str, denial: Denial) -> bool:
        """Remember a refusal; True when it is news (not the one last recorded for `work`)."""
        held = self.groups.setdefault((namespace, name), {})
        news = held.get(work) != denial
        held[work] = denial
        return news

    def clear(self, namespace: str, name: str, work: str) -> bool:
        """Forget `work`'s refusal (it succeeded); True when there was one."""
        held = self.groups.get((namespace, name))
        if held is None or work not in held:
            return False
        del held[work]
        if not held:
            del self.groups[(namespace, name)]
        return True

    def forget(self, namespace: str, name: str) -> None:
        self.groups.pop((namespace, name), None)

    def set_namespaces(self, found: Mapping[str, Iterable[Denial]]) -> None:
        self.namespaces = {key: tuple(value) for key, value in found.items() if value}

    def of(self, namespace: str, name: str) -> list[Denial]:
        listed = [
            *self.namespaces.get("", ()),
            *self.namespaces.get(namespace, ()),
            *self.groups.get((namespace, name), {}).values(),
        ]
        return list(dict.fromkeys(listed))
