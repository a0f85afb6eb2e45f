# mypy: disable-error-code="import-untyped"
"""The job's output, and how it replaces the previous one without ever showing a partial one.

Layout under OUTPUT (a directory or fsspec URL):

    recommendations.json          the summary the operator reads (small; replaced last)
    runs/<run-id>/recommendations.parquet   one row per group
    runs/<run-id>/spreads.parquet           join spreads per group and batch size
    runs/<run-id>/report.md, report.png     for people
    runs/<run-id>/recommendations.json      the same summary, kept with its run

A run is built under `.staging-<run-id>/`, renamed to `runs/<run-id>/` when whole, and only then is
`recommendations.json` replaced (written hidden, then renamed). A job that fails at any point
leaves the previous summary and the run it names untouched; old runs beyond `keep_runs` are
removed after the swap.
"""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from rebalancer.learning.choosing import ClusterChoice, GroupChoice
from rebalancer.learning.inputs import HistoryInputs
from rebalancer.learning.reports import render_markdown, render_png
from rebalancer.structs.recommendations import SUMMARY_FILE, SUMMARY_SCHEMA

RUNS_DIR = "runs"


@dataclass(frozen=True)
class LearnOutput:
    run_id: str
    summary: dict[str, Any]
    recommendations: pa.Table
    spreads: pa.Table
    report_md: str
    report_png: bytes
    # Where the run was written (set by write_output).
    location: str = ""


def _group_record(choice: GroupChoice) -> dict[str, Any]:
    facts = choice.facts
    return {
        "cluster": facts.cluster,
        "namespace": facts.namespace,
        "name": facts.name,
        "groupId": facts.group_id,
        "initialRebalanceDelayMs": choice.delay_ms,
        # "group": a streams group's own streams.initial.rebalance.delay.ms, learned from its
        # own start-ups; "cluster": the broker's group.initial.rebalance.delay.ms.
        "delayScope": choice.delay_scope,
        "protocol": facts.protocol,
        "batchSize": choice.batch_size,
        "sessionTimeoutMs": choice.session_timeout_ms,
        "expectedCostPerDaySeconds": round(choice.cost_per_day_s, 3),
        "defaultCostPerDaySeconds": round(choice.default_cost_per_day_s, 3),
        "improvement": round(choice.improvement, 4),
        "members": facts.members,
        "partitions": facts.partitions,
        "current": {
            "initialRebalanceDelayMs": facts.current_delay_ms,
            "batchSize": facts.current_batch_size,
            "sessionTimeoutMs": facts.current_session_ms,
        },
        "evidence": {
            "joins": facts.join_samples,
            "rebalances": facts.rebalance_samples,
            "departures": facts.departure_samples,
            "rolloutsPerDay": round(facts.rollouts_per_day, 4),
            "departuresPerDay": round(facts.departures_per_day, 4),
            "latencyP50Ms": facts.latency_p50_ms,
            "latencyP90Ms": facts.latency_p90_ms,
            "rebalanceCostMs": round(facts.processing_ms, 1),
        },
        "notes": list(choice.notes),
    }


def build_output(
    run_id: str,
    options_history: str,
    inputs: HistoryInputs,
    clusters: Sequence[ClusterChoice],
    choices: Sequence[GroupChoice],
    spreads: Sequence[dict[str, Any]],
    messages: Sequence[str],
) -> LearnOutput:
    summary = _summary(run_id, options_history, inputs, clusters, choices, messages)
    return LearnOutput(
        run_id=run_id,
        summary=summary,
        recommendations=pa.Table.from_pylist(
            [_recommendation_row(choice) for choice in choices], schema=RECOMMENDATION_SCHEMA
        ),
        spreads=pa.Table.from_pylist([_spread_row(row) for row in spreads], schema=SPREAD_SCHEMA),
        report_md=render_markdown(summary, clusters, choices, spreads),
        report_png=render_png(clusters, choices),
    )


def _summary(
    run_id: str,
    options_history: str,
    inputs: HistoryInputs,
    clusters: Sequence[ClusterChoice],
    choices: Sequence[GroupChoice],
    messages: Sequence[str],
) -> dict[str, Any]:
    """recommendations.json: what the operator reads (structs.recommendations)."""
    generated = datetime.datetime.now(tz=datetime.UTC).isoformat(timespec="seconds")
    groups = {f"{c.facts.namespace}/{c.facts.name}": _group_record(c) for c in choices}
    return {
        "schema": SUMMARY_SCHEMA,
        "runId": run_id,
        "generatedAt": generated,
        "history": options_history,
        "records": inputs.rows,
        "files": len(inputs.files) + len(inputs.json_files),
        "skippedFiles": [{"path": s.path, "reason": s.reason} for s in inputs.skipped],
        "messages": list(messages),
        "clusters": {cluster.cluster: _cluster_record(cluster) for cluster in clusters},
        "groups": groups,
        "report": f"{RUNS_DIR}/{run_id}/report.md",
    }


def _cluster_record(cluster: ClusterChoice) -> dict[str, Any]:
    return {
        "initialRebalanceDelayMs": cluster.delay_ms,
        "currentInitialRebalanceDelayMs": cluster.current_delay_ms,
        "groups": cluster.groups,
        "scoredGroups": cluster.scored_groups,
        "ownDelayGroups": cluster.own_delay_groups,
        "notes": list(cluster.notes),
    }


def _recommendation_row(c: GroupChoice) -> dict[str, Any]:
    """A row of recommendations.parquet (RECOMMENDATION_SCHEMA)."""
    return {
        "cluster": c.facts.cluster,
        "namespace": c.facts.namespace,
        "name": c.facts.name,
        "group_id": c.facts.group_id,
        "initial_rebalance_delay_ms": c.delay_ms,
        "delay_scope": c.delay_scope,
        "batch_size": c.batch_size,
        "session_timeout_ms": c.session_timeout_ms,
        "cost_per_day_s": c.cost_per_day_s,
        "default_cost_per_day_s": c.default_cost_per_day_s,
        "improvement": c.improvement,
        "members": c.facts.members,
        "partitions": c.facts.partitions,
        "join_samples": c.facts.join_samples,
        "rebalance_samples": c.facts.rebalance_samples,
        "departure_samples": c.facts.departure_samples,
        "rebalance_cost_ms": c.facts.processing_ms,
        "notes": "; ".join(c.notes),
    }


def _spread_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of spreads.parquet (SPREAD_SCHEMA)."""
    return {
        "cluster": row["cluster"],
        "namespace": row["namespace"],
        "name": row["name"],
        "group_id": row["group_id"],
        "batch_members": int(row["batch_members"]),
        "batches": int(row["batches"]),
        "spread_p50_ms": float(row["spread_p50_ms"]),
        "spread_p90_ms": float(row["spread_p90_ms"]),
    }


RECOMMENDATION_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("namespace", pa.string()),
        ("name", pa.string()),
        ("group_id", pa.string()),
        ("initial_rebalance_delay_ms", pa.float64()),
        ("delay_scope", pa.string()),
        ("batch_size", pa.int32()),
        ("session_timeout_ms", pa.float64()),
        ("cost_per_day_s", pa.float64()),
        ("default_cost_per_day_s", pa.float64()),
        ("improvement", pa.float64()),
        ("members", pa.int32()),
        ("partitions", pa.int32()),
        ("join_samples", pa.int64()),
        ("rebalance_samples", pa.int64()),
        ("departure_samples", pa.int64()),
        ("rebalance_cost_ms", pa.float64()),
        ("notes", pa.string()),
    ]
)
SPREAD_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("namespace", pa.string()),
        ("name", pa.string()),
        ("group_id", pa.string()),
        ("batch_members", pa.int32()),
        ("batches", pa.int64()),
        ("spread_p50_ms", pa.float64()),
        ("spread_p90_ms", pa.float64()),
    ]
)


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def write_output(root: str, output: LearnOutput, keep_runs: int = 5) -> LearnOutput:
    """Write a whole run, then swap the summary; return the output with its location."""
    filesystem, base = fsspec.core.url_to_fs(root)
    base = str(base).rstrip("/")
    staging = f"{base}/.staging-{output.run_id}"
    final = f"{base}/{RUNS_DIR}/{output.run_id}"
    summary_text = json.dumps(output.summary, indent=2, sort_keys=True)
    filesystem.makedirs(staging, exist_ok=True)
    files: dict[str, bytes] = {
        "recommendations.parquet": _parquet_bytes(output.recommendations),
        "spreads.parquet": _parquet_bytes(output.spreads),
        "report.md": output.report_md.encode("utf-8"),
        "report.png": output.report_png,
        SUMMARY_FILE: summary_text.encode("utf-8"),
    }
    for name, content in files.items():
        filesystem.pipe_file(f"{staging}/{name}", content)
    filesystem.makedirs(f"{base}/{RUNS_DIR}", exist_ok=True)
    filesystem.mv(staging, final, recursive=True)
    hidden = f"{base}/.{SUMMARY_FILE}.tmp"
    filesystem.pipe_file(hidden, summary_text.encode("utf-8"))
    # The one step that publishes the run: a rename over the old summary.
    filesystem.mv(hidden, f"{base}/{SUMMARY_FILE}")
    _prune(filesystem, f"{base}/{RUNS_DIR}", keep_runs, output.run_id)
    return LearnOutput(
        run_id=output.run_id,
        summary=output.summary,
        recommendations=output.recommendations,
        spreads=output.spreads,
        report_md=output.report_md,
        report_png=output.report_png,
        location=final,
    )


def _prune(filesystem: fsspec.AbstractFileSystem, runs: str, keep: int, current: str) -> None:
    names = sorted(
        str(path).rstrip("/").rsplit("/", 1)[-1] for path in filesystem.ls(runs, detail=False)
    )
    for name in names[: max(len(names) - max(keep, 1), 0)]:
        if name != current:
            filesystem.rm(f"{runs}/{name}", recursive=True)
