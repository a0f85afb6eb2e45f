"""The sidecar's settings: flags first, then the environment the application container has.

The sidecar sits next to the application and reads the same KAFKA_* variables, so it joins the
same cluster and group with the same session timeout and assignment strategy. A group's members
must share an assignment protocol: copying the application's values is what lets the sidecar
join at all.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rebalancer.clients.librdkafka_config import read_properties_file
from rebalancer.structs.kafka_properties import (
    SettingsError,
    drop_classic_only,
    env_properties,
    env_variable,
)

# Properties that are the application's own: the sidecar sets its own or none.
_APPLICATION_ONLY = frozenset(
    {"client.id", "group.instance.id", "auto.offset.reset", "enable.auto.commit"}
)
DEFAULT_PORT = 8091
DEFAULT_RATE_PER_MINUTE = 6.0
DEFAULT_BURST = 3


@dataclass(frozen=True)
class SidecarSettings:
    kafka: dict[str, str] = field(repr=False)
    group_id: str
    pod_name: str
    token_file: Path
    listen_host: str = "127.0.0.1"
    listen_port: int = DEFAULT_PORT
    rate_per_minute: float = DEFAULT_RATE_PER_MINUTE
    burst: int = DEFAULT_BURST
    instance_id: str | None = None
    # A request nobody acted on for this long is answered "expired".
    request_ttl_seconds: float = 120.0
    # From the rejoin until the new generation must be seen, else "failed".
    enforce_timeout_seconds: float = 120.0
    report_interval_seconds: float = 5.0

    @property
    def client_id(self) -> str:
        return f"{self.pod_name}-sidecar"

    @property
    def protocol(self) -> str:
        return self.kafka.get("group.protocol", "classic")


def _number(raw: str | float | None, name: str, low: float) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number, not {raw!r}") from None
    if value < low:
        raise SettingsError(f"{name} must be at least {low:g}, not {value:g}")
    return value


def parse_listen(raw: str) -> tuple[str, int]:
    """`host:port`, `:port` or `[v6]:port`."""
    host, sep, port = raw.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingsError(f"--listen must be host:port, not {raw!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def load_settings(
    *,
    bootstrap: str | None = None,
    group_id: str | None = None,
    config_file: str | None = None,
    token_file: str | None = None,
    listen: str | None = None,
    rate_per_minute: float | None = None,
    burst: int | None = None,
    pod_name: str | None = None,
    env: Mapping[str, str] | None = None,
) -> SidecarSettings:
    env = os.environ if env is None else env
    kafka = _kafka_properties(env, config_file, bootstrap, group_id)
    token_path = _token_path(env, token_file)
    host, port = parse_listen(
        listen or env.get("REBALANCER_SIDECAR_LISTEN", "").strip() or f"127.0.0.1:{DEFAULT_PORT}"
    )
    rate = _number(
        rate_per_minute
        if rate_per_minute is not None
        else env.get("REBALANCER_SIDECAR_RATE_PER_MINUTE"),
        "the rate limit (requests per minute)",
        0.001,
    )
    burst_value = _number(
        burst if burst is not None else env.get("REBALANCER_SIDECAR_BURST"), "the burst", 1
    )
    pod = pod_name or env.get("POD_NAME", "").strip() or socket.gethostname()
    instance = env.get("KAFKA_GROUP_INSTANCE_ID", "").strip()
    return SidecarSettings(
        kafka=kafka,
        group_id=kafka["group.id"],
        pod_name=pod,
        token_file=Path(token_path),
        listen_host=host,
        listen_port=port,
        rate_per_minute=rate if rate is not None else DEFAULT_RATE_PER_MINUTE,
        burst=int(burst_value) if burst_value is not None else DEFAULT_BURST,
        # A static application member makes a static sidecar: it restarts with the pod and
        # must keep its slot the same way.
        instance_id=f"{instance}-sidecar" if instance else None,
    )


def _kafka_properties(
    env: Mapping[str, str], config_file: str | None, bootstrap: str | None, group_id: str | None
) -> dict[str, str]:
    """The application's Kafka properties (its file, then its KAFKA_* variables) with the
    flags over them, less what only the application itself may set."""
    file_path = config_file or env.get("KAFKA_CONFIG_FILE") or None
    kafka = read_properties_file(Path(file_path)) if file_path else {}
    kafka.update(env_properties(env))
    if bootstrap:
        kafka["bootstrap.servers"] = bootstrap
    if group_id:
        kafka["group.id"] = group_id
    for name, variable in (("bootstrap.servers", "--bootstrap"), ("group.id", "--group-id")):
        if not kafka.get(name):
            raise SettingsError(f"{name} is not set: pass {variable} or set {env_variable(name)}")
    for name in _APPLICATION_ONLY:
        kafka.pop(name, None)
    drop_classic_only(kafka)
    return kafka


def _token_path(env: Mapping[str, str], token_file: str | None) -> str:
    token_path = token_file or env.get("REBALANCER_SIDECAR_TOKEN_FILE", "").strip()
    if not token_path:
        raise SettingsError(
            "no token file: pass --token-file or set REBALANCER_SIDECAR_TOKEN_FILE "
            "(mount the token Secret as a file); the endpoint never runs unauthenticated"
        )
    return token_path
