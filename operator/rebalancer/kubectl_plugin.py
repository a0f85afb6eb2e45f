"""`kubectl-rebalancer`: the kubectl plugin (`kubectl rebalancer VERB`), docs/kubectl-plugin.md.

kubectl runs any `kubectl-*` executable on PATH as a plugin; this one is installed with the
package (pyproject's `[project.scripts]`) or by krew (deploy/krew/rebalancer.yaml). It reads and
writes through rebalancer.clients.kubectl_api and decides what to show and write in
rebalancer.kubectl, without I/O.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TextIO

from rebalancer.clients.kubectl_api import KubectlApi, KubectlApiError, connect
from rebalancer.kubectl.arguments import Request, Verb, parse_request
from rebalancer.kubectl.rebalances import explain_last, rebalances_from_events, render_history
from rebalancer.kubectl.requests import (
    Change,
    baseline_taken,
    enforce_change,
    pause_change,
    resume_change,
)
from rebalancer.kubectl.tables import GroupRow, group_row, render_groups

Clock = Callable[[], float]
Sleep = Callable[[float], None]
# The operator looks at enforcement triggers every 3 s (handlers.enforcing).
BASELINE_POLL_SECONDS = 1.0
CLEAR_SCREEN = "\x1b[H\x1b[2J"


def _uid(body: Mapping[str, Any]) -> str | None:
    metadata = body.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
    return uid if isinstance(uid, str) else None


def watch_groups(
    fetch: Callable[[], Sequence[Mapping[str, Any]]],
    out: TextIO,
    *,
    namespace: str | None,
    interval: float,
    clock: Clock = time.time,
    sleep: Sleep = time.sleep,
    redraw: bool = False,
) -> None:
    """The `get --watch` loop until interrupted: on a terminal (`redraw`) the table is drawn
    again in place at every refresh; elsewhere it is printed again when a row changed (ages
    aside), so that a log of it holds each change once."""
    last: list[GroupRow] | None = None
    while True:
        bodies = fetch()
        # Compared without their creation times, which only make the ages.
        rows = sorted(
            (replace(group_row(body), created_at=None) for body in bodies),
            key=lambda row: (row.namespace, row.name),
        )
        table = render_groups(bodies, clock(), namespace=namespace)
        if redraw:
            out.write(CLEAR_SCREEN + table + "\n")
            out.flush()
        elif rows != last:
            if last is not None:
                out.write("\n")
            out.write(table + "\n")
            out.flush()
        last = rows
        sleep(interval)


def _apply(
    api: KubectlApi,
    namespace: str,
    name: str,
    change: Change,
    out: TextIO,
    err: TextIO,
) -> int:
    if change.refused:
        err.write(f"error: {change.message}\n")
        return 1
    if change.patch is not None:
        api.patch_group(namespace, name, dict(change.patch))
    out.write(change.message + "\n")
    for note in change.notes:
        out.write(f"note: {note}\n")
    return 0


def enforce(
    api: KubectlApi,
    namespace: str,
    name: str,
    out: TextIO,
    err: TextIO,
    *,
    timeout: float,
    clock: Clock = time.time,
    monotonic: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
) -> int:
    """Write a request token; when the operator has never seen one, write a baseline first,
    wait for the operator to take it, then write the request."""
    change = enforce_change(api.read_group(namespace, name), clock())
    status = _apply(api, namespace, name, change, out, err)
    if status or change.baseline is None:
        return status
    deadline = monotonic() + timeout
    while True:
        body = api.read_group(namespace, name)
        if baseline_taken(body, change.baseline):
            break
        if monotonic() >= deadline:
            err.write(
                f"error: the operator did not take the baseline token within {timeout:g} s "
                "(status.enforcement.memory.tokenSeen is still false): is it running and "
                "watching this namespace? Run `enforce` again once it has.\n"
            )
            return 1
        sleep(BASELINE_POLL_SECONDS)
    return _apply(api, namespace, name, enforce_change(body, clock()), out, err)


def run(
    request: Request,
    api: KubectlApi,
    out: TextIO,
    err: TextIO,
    *,
    clock: Clock = time.time,
) -> int:
    namespace = request.connection.namespace or api.default_namespace
    if request.verb is Verb.GET:
        listed = None if request.all_namespaces else namespace

        def fetch() -> list[dict[str, Any]]:
            return api.list_groups(listed)

        if request.watch:
            with contextlib.suppress(KeyboardInterrupt):
                watch_groups(
                    fetch,
                    out,
                    namespace=listed,
                    interval=request.interval_seconds,
                    clock=clock,
                    redraw=out.isatty(),
                )
            return 0
        out.write(render_groups(fetch(), clock(), namespace=listed) + "\n")
        return 0
    name = str(request.group)
    if request.verb is Verb.ENFORCE:
        return enforce(api, namespace, name, out, err, timeout=request.timeout_seconds)
    body = api.read_group(namespace, name)
    if request.verb in (Verb.HISTORY, Verb.WHY):
        entries = rebalances_from_events(api.group_events(namespace, name), _uid(body))
        if request.verb is Verb.HISTORY:
            out.write(render_history(body, entries, clock(), request.limit) + "\n")
        else:
            out.write(explain_last(body, entries, clock()) + "\n")
        return 0
    if request.verb is Verb.PAUSE:
        return _apply(api, namespace, name, pause_change(body), out, err)
    return _apply(api, namespace, name, resume_change(body, clock()), out, err)


def main(argv: Sequence[str] | None = None) -> int:
    request = parse_request(sys.argv[1:] if argv is None else argv)
    try:
        api = connect(request.connection.kubeconfig, request.connection.context)
    except KubectlApiError as error:
        sys.stderr.write(f"error: {error}\n")
        return 1
    try:
        return run(request, api, sys.stdout, sys.stderr)
    except KubectlApiError as error:
        sys.stderr.write(f"error: {error}\n")
        return 1
    finally:
        api.close()


if __name__ == "__main__":
    sys.exit(main())
