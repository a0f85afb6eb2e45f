"""`spec.policy.enforce` as typed data (the CRD block is in docs/enforcing.md).

Kept apart from specs.py so that the enforcement feature can be wired in by calling
`parse_enforce_policy(spec["policy"].get("enforce"))`; every problem names its field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rebalancer.structs.problems import FieldProblem, SpecInvalid, kind_of

DEFAULT_SIDECAR_PORT = 8091
MIN_SCHEDULE_SECONDS = 60
MAX_SCHEDULE_SECONDS = 7 * 24 * 3600
MAX_TOKEN = 253


@dataclass(frozen=True)
class SidecarPolicy:
    inject: bool = False
    port: int = DEFAULT_SIDECAR_PORT
    # The Secret (name, key) holding the bearer token the sidecar requires.
    token_secret: str | None = None
    token_key: str = "token"
    # Where to reach the sidecars when not through the workload's pods (a Service, the lab).
    url: str | None = None


@dataclass(frozen=True)
class EnforceSpec:
    request_token: str | None = None
    schedule_seconds: int | None = None
    after_rollout: bool = False
    on_topic_creation: bool = False
    retry_when_stable: bool = False
    sidecar: SidecarPolicy = field(default_factory=SidecarPolicy)

    @property
    def enabled(self) -> bool:
        return bool(
            self.request_token is not None
            or self.schedule_seconds
            or self.after_rollout
            or self.on_topic_creation
        )


def parse_enforce_policy(raw: object, path: str = "spec.policy.enforce") -> EnforceSpec:
    if raw is None:
        return EnforceSpec()
    problems: list[FieldProblem] = []
    if not isinstance(raw, Mapping):
        problem = FieldProblem(path, f"must be an object, got {kind_of(raw)}", "use a mapping")
        raise SpecInvalid((problem,))

    def boolean(source: Mapping[str, object], key: str, where: str, default: bool) -> bool:
        value = source.get(key, default)
        if not isinstance(value, bool):
            problems.append(FieldProblem(f"{where}.{key}", "must be true or false", "use a bool"))
            return default
        return value

    def integer(
        source: Mapping[str, object], key: str, where: str, low: int, high: int
    ) -> int | None:
        value = source.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            problems.append(
                FieldProblem(
                    f"{where}.{key}",
                    f"must be an integer from {low} to {high}, got {value!r}",
                    f"set a value from {low} to {high}",
                )
            )
            return None
        return value

    token = raw.get("requestToken")
    if token is not None and (not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN):
        problems.append(
            FieldProblem(
                f"{path}.requestToken",
                f"must be a string of 1 to {MAX_TOKEN} characters",
                "set any new string (a timestamp works) to ask for one rebalance",
            )
        )
        token = None
    sidecar_raw = raw.get("sidecar") or {}
    sidecar = SidecarPolicy()
    if not isinstance(sidecar_raw, Mapping):
        problems.append(FieldProblem(f"{path}.sidecar", "must be an object", "use a mapping"))
    else:
        where = f"{path}.sidecar"
        secret_name: str | None = None
        secret_key = "token"
        ref = sidecar_raw.get("tokenSecretRef")
        if ref is not None:
            if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str):
                problems.append(
                    FieldProblem(
                        f"{where}.tokenSecretRef",
                        "must be {name, key}",
                        "name the Secret that holds the sidecar's token",
                    )
                )
            else:
                secret_name = str(ref["name"])
                key = ref.get("key", "token")
                secret_key = key if isinstance(key, str) and key else "token"
        inject = boolean(sidecar_raw, "inject", where, False)
        if inject and secret_name is None:
            problems.append(
                FieldProblem(
                    f"{where}.tokenSecretRef",
                    "is required when inject is true",
                    "create a Secret with a random token and reference it",
                )
            )
        url = sidecar_raw.get("url")
        if url is not None and (
            not isinstance(url, str) or not url.startswith(("http://", "https://"))
        ):
            problems.append(
                FieldProblem(
                    f"{where}.url",
                    f"must be an http:// or https:// URL, got {url!r}"[:200],
                    "give the sidecars' Service, e.g. http://orders-sidecar.default.svc:8091",
                )
            )
            url = None
        sidecar = SidecarPolicy(
            url=url if isinstance(url, str) else None,
            inject=inject,
            port=integer(sidecar_raw, "port", where, 1024, 65535) or DEFAULT_SIDECAR_PORT,
            token_secret=secret_name,
            token_key=secret_key,
        )
    spec = EnforceSpec(
        request_token=token if isinstance(token, str) else None,
        schedule_seconds=integer(
            raw, "scheduleSeconds", path, MIN_SCHEDULE_SECONDS, MAX_SCHEDULE_SECONDS
        ),
        after_rollout=boolean(raw, "afterRollout", path, False),
        on_topic_creation=boolean(raw, "onTopicCreation", path, False),
        retry_when_stable=boolean(raw, "retryWhenStable", path, False),
        sidecar=sidecar,
    )
    if problems:
        raise SpecInvalid(tuple(problems))
    return spec
