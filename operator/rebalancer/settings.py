"""Operator settings, from flags and environment, shared by every handler through kopf's memo."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class OperatorSettings:
    kubeconfig: Path | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    reports_host: str = "0.0.0.0"
    reports_port: int = 8090
    report_token: str | None = field(default=None, repr=False)
    # A directory or an fsspec URL (s3://...): a Path would fold the URL's double slash.
    history_dir: str | None = None
    # Where `rebalancer learn` writes recommendations.json; default <history_dir>/_recommendations.
    recommendations_dir: str | None = None
    liveness_url: str | None = None
    min_observe_spacing_seconds: float = 1.0
    status_refresh_seconds: float = 60.0
    max_workers: int = 20
    # Image of the join gate init container; the chart sets the operator's own image.
    gate_image: str | None = None

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def token_from_environment(env: dict[str, str] | None = None) -> str | None:
    """The report token: REBALANCER_REPORT_TOKEN, or the file REBALANCER_REPORT_TOKEN_FILE.

    A file is preferred in clusters because a mounted Secret updates without a restart.
    """
    values = env if env is not None else dict(os.environ)
    path = values.get("REBALANCER_REPORT_TOKEN_FILE")
    if path:
        return Path(path).read_text(encoding="utf-8").strip() or None
    return values.get("REBALANCER_REPORT_TOKEN") or None
