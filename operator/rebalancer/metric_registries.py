"""The Prometheus registry each of the project's processes (operator, sidecar) serves.

A registry of its own, so that nothing else imported into the process adds series to the
scrape, with the standard process and Python runtime collectors added on purpose: process_*
(CPU, memory, file descriptors, start time) and python_* (GC, version) are what a user looks at
first when a process is slow or restarts. Only prometheus_client is imported: the sidecar's
image has nothing more.
"""

from __future__ import annotations

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    disable_created_metrics,
)


def registry_with_process_collectors() -> CollectorRegistry:
    """A new registry holding the default registry's process and runtime collectors.

    The collectors are registered, not copied, so they report this process. `_created` series
    are turned off for the whole process: they double the series count and nothing reads them."""
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry(auto_describe=True)
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    return registry
