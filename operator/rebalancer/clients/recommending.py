# mypy: disable-error-code="import-untyped"
"""Read the latest learned recommendations (`recommendations.json`, written by `rebalancer learn`).

The summary is one small JSON document for every group; observers of many groups read it often,
so it is parsed once per change (its modification time or size) and shared. A missing,
half-written (impossible with the job's rename, but a hand-copied file might be) or foreign
document reads as "no recommendation", never as an error that would stop the observer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

import fsspec

from rebalancer.structs.recommendations import (
    SUMMARY_FILE,
    Recommendation,
    recommendation_from_summary,
)

logger = logging.getLogger(__name__)


class RecommendationReader:
    """Reads OUTPUT/recommendations.json (a directory or fsspec URL); None root reads nothing."""

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self.root = None if root is None else str(root)
        self._lock = threading.Lock()
        self._stamp: tuple[object, ...] | None = None
        self._summary: Mapping[str, Any] | None = None

    def _load(self) -> Mapping[str, Any] | None:
        if self.root is None:
            return None
        filesystem, base = fsspec.core.url_to_fs(self.root)
        path = f"{str(base).rstrip('/')}/{SUMMARY_FILE}"
        try:
            info = filesystem.info(path)
        except FileNotFoundError:
            return None
        stamp = tuple(info.get(key) for key in ("mtime", "created", "LastModified", "ETag", "size"))
        with self._lock:
            if stamp == self._stamp:
                return self._summary
        try:
            loaded = json.loads(filesystem.cat_file(path).decode("utf-8"))
        except (OSError, ValueError) as error:
            logger.warning("recommendations at %s unreadable: %s", path, error)
            loaded = None
        summary = loaded if isinstance(loaded, Mapping) else None
        with self._lock:
            self._stamp, self._summary = stamp, summary
        return summary

    def read_now(self, namespace: str, name: str) -> Recommendation | None:
        summary = self._load()
        if summary is None:
            return None
        return recommendation_from_summary(summary, namespace, name)

    async def read(self, namespace: str, name: str) -> Recommendation | None:
        """The latest recommendation for the ConsumerGroup namespace/name, if any."""
        if self.root is None:
            return None
        return await asyncio.to_thread(self.read_now, namespace, name)
