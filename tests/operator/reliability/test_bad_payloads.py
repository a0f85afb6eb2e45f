# mypy: disable-error-code="import-untyped"
"""Generated member reports, sidecar requests and history files: refused by field, never a crash.

Missing and wrong tokens at the sidecar are covered in tests/sidecar/test_sidecar_server.py
(test_missing_or_wrong_token_is_refused_and_nothing_happens); here every body reaches the parser.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.operator.reliability.strategies import hostile, json_like

from rebalancer.clients.receiving import ReportHub
from rebalancer.clients.receiving import build_app as build_reports_app
from rebalancer.clients.recording import HistoryRecorder
from rebalancer.learning.compaction import compact
from rebalancer.learning.history_table import read_history
from rebalancer.learning.inputs import find_inputs
from rebalancer.sidecar.agent import EnforceAnswer
from rebalancer.sidecar.limits import RateLimiter
from rebalancer.sidecar.server import TokenFile
from rebalancer.sidecar.server import build_app as build_sidecar_app
from rebalancer.structs.enforcement import EnforceStatus
from rebalancer.structs.reports import ReportInvalid, parse_report

SOME = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
TOKEN = "reliability-token"

REPORT: dict[str, Any] = {
    "version": 1,
    "groupId": "orders",
    "member": {"host": "orders-consumer-0", "clientId": "c0", "memberId": "m0"},
    "event": "assigned",
    "generation": 3,
    "partitions": [{"topic": "orders", "partition": 0}],
    "lag": 0,
    "timestamp": 1700000000.0,
}
REPORT_FIELDS = [
    ("version",),
    ("groupId",),
    ("member",),
    ("member", "host"),
    ("member", "memberId"),
    ("member", "instanceId"),
    ("event",),
    ("generation",),
    ("partitions",),
    ("lag",),
    ("timestamp",),
    ("protocol",),
    ("namespace",),
]
SIDECAR_BODY: dict[str, Any] = {"groupId": "orders", "requestId": "r-1", "reason": "test"}

SIDECAR_FIELDS = ["groupId", "requestId", "reason", "retryWhenStable", "waitSeconds"]


def with_field(base: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(base))
    node = body
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return body


def report_accepted(raw: object) -> bool:
    try:
        parse_report(raw, 1700000000.0)
    except ReportInvalid as error:
        assert error.problems and all(p.path and p.message for p in error.problems)
        return False
    return True


def test_the_base_report_is_valid() -> None:
    assert report_accepted(REPORT)


@SOME
@given(field=st.sampled_from(REPORT_FIELDS), value=hostile)
def test_a_hostile_report_field_is_named_in_the_refusal(
    field: tuple[str, ...], value: object
) -> None:
    raw = with_field(REPORT, field, value)
    try:
        report = parse_report(raw, 1700000000.0)
    except ReportInvalid as error:
        names = [p.path for p in error.problems]
        top = ".".join(field)
        assert any(n.startswith(field[0]) or top.startswith(n) for n in names), (top, names)
        assert len(error.summary()) < 2000
        return
    # Accepted: the values that made it in are sane.
    assert -1 <= report.generation < 2**63
    assert math.isfinite(report.timestamp) or field == ("timestamp",)


@SOME
@given(raw=json_like)
def test_any_json_is_a_report_or_a_refusal(raw: object) -> None:
    report_accepted(raw)


def json_bytes(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


bodies = (
    json_like.map(json_bytes)
    | st.sampled_from(REPORT_FIELDS).flatmap(
        lambda f: hostile.map(lambda v: json_bytes(with_field(REPORT, f, v)))
    )
    | st.binary(max_size=200)
    | st.sampled_from([b"", b"{", b"\xff\xfe", b"[]" * 10, b'{"a":' * 2000 + b"1" + b"}" * 2000])
)


@SOME
@given(body=st.lists(bodies, min_size=1, max_size=8))
def test_the_report_endpoint_answers_every_body_with_202_or_a_named_400(
    body: list[bytes],
) -> None:
    async def run() -> None:
        hub = ReportHub()
        client = TestClient(TestServer(build_reports_app(hub, TOKEN)))
        await client.start_server()
        try:
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            for data in body:
                response = await client.post("/v1/reports", data=data, headers=headers)
                answer = await response.json()
                assert response.status in (202, 400, 413), (response.status, answer)
                if response.status == 400:
                    assert answer.get("field"), answer
                    assert len(answer["error"]) < 3000
            # The server survived everything above.
            assert (await client.get("/healthz")).status == 200
        finally:
            await client.close()

    asyncio.run(run())


async def test_the_report_endpoint_refuses_a_body_too_large_without_reading_it() -> None:
    client = TestClient(TestServer(build_reports_app(ReportHub(), TOKEN)))
    await client.start_server()
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        response = await client.post("/v1/reports", data=b"x" * 5_000_000, headers=headers)
        assert response.status == 413
    finally:
        await client.close()


class Engine:
    group_id = "orders"

    async def submit(
        self, group_id: str, request_id: str, reason: str, retry: bool, wait: float
    ) -> EnforceAnswer:
        assert 0 <= wait <= 120 and len(request_id) <= 128
        return EnforceAnswer(request_id, EnforceStatus.ENFORCED, generation=4)

    def lookup(self, request_id: str) -> EnforceAnswer | None:
        return None

    def health(self) -> tuple[bool, dict[str, object]]:
        return True, {}

    def describe(self) -> dict[str, object]:
        return {"groupId": self.group_id}


sidecar_bodies = (
    json_like.map(json_bytes)
    | st.sampled_from(SIDECAR_FIELDS).flatmap(
        lambda f: hostile.map(lambda v: json_bytes({**SIDECAR_BODY, f: v}))
    )
    | st.binary(max_size=100)
    | st.sampled_from([b"[" * 5000 + b"]" * 5000, b'{"groupId":' * 3000 + b"1" + b"}" * 3000])
)


@SOME
@given(body=st.lists(sidecar_bodies, min_size=1, max_size=6))
def test_the_sidecar_answers_every_body_with_a_named_refusal_or_an_answer(
    tmp_path_factory: pytest.TempPathFactory, body: list[bytes]
) -> None:
    token_file = tmp_path_factory.mktemp("sidecar") / "token"
    token_file.write_text(TOKEN)

    async def run() -> None:
        limiter = RateLimiter(1000, 1000, lambda: 0.0)
        client = TestClient(TestServer(build_sidecar_app(Engine(), TokenFile(token_file), limiter)))
        await client.start_server()
        try:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            for data in body:
                response = await client.post("/v1/enforce", data=data, headers=headers)
                answer = await response.json()
                assert response.status in (200, 202, 400, 404, 409, 413), (response.status, answer)
                if response.status == 400:
                    assert "error" in answer
                    parsed = _object(data)
                    if parsed is not None and "field" not in answer:
                        # Only a body that is not an object may be refused without a field.
                        assert not isinstance(parsed, dict), answer
            assert (await client.get("/healthz")).status == 200
        finally:
            await client.close()

    asyncio.run(run())


def _object(data: bytes) -> object | None:
    try:
        parsed: object = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return parsed


# History files: what a damaged disk, another program or a newer rebalancer may leave behind.
def _partition(root: Path) -> Path:
    folder = root / "date=2024-05-01" / "namespace=default"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


foreign_tables = st.sampled_from(
    [
        pa.table({"x": [1, 2, 3]}),
        pa.table({"detected_at": ["yesterday"], "record_type": [1]}),
        pa.table({"detected_at": [1.0]}).replace_schema_metadata(
            {b"rebalancer.history.schema_version": b"999"}
        ),
        pa.table({"group_id": ["é" * 10_000], "detected_at": [math.nan]}),
    ]
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    garbage=st.binary(max_size=300),
    truncate=st.integers(min_value=0, max_value=400),
    table=foreign_tables,
)
def test_the_learning_reader_skips_corrupt_and_foreign_files_with_a_reason(
    tmp_path_factory: pytest.TempPathFactory, garbage: bytes, truncate: int, table: pa.Table
) -> None:
    root = tmp_path_factory.mktemp("history")
    folder = _partition(root)
    (folder / "garbage.parquet").write_bytes(garbage)
    (folder / "magic-only.parquet").write_bytes(b"PAR1" + garbage + b"PAR1")
    pq.write_table(table, folder / "foreign.parquet")
    whole = (folder / "foreign.parquet").read_bytes()
    (folder / "truncated.parquet").write_bytes(whole[: max(0, len(whole) - truncate - 1)])
    inputs = find_inputs(root)
    assert inputs.files == ()
    assert {Path(skip.path).name for skip in inputs.skipped} == {
        "garbage.parquet",
        "magic-only.parquet",
        "foreign.parquet",
        "truncated.parquet",
    }
    assert all(skip.reason for skip in inputs.skipped)
    assert any("nothing to learn from" in line for line in inputs.messages)


def test_a_corrupt_file_beside_good_history_is_skipped_and_the_good_one_read(
    tmp_path: Path,
) -> None:
    from tests.operator.reliability.history_samples import sample_events

    asyncio.run(HistoryRecorder(tmp_path).record(sample_events()))
    good = read_history(tmp_path)
    assert good
    folder = next(tmp_path.glob("date=*/namespace=*"))
    (folder / "zz-corrupt.parquet").write_bytes(b"PAR1 not parquet PAR1")
    inputs = find_inputs(tmp_path)
    assert len(inputs.files) + len(inputs.json_files) >= 1 and len(inputs.skipped) == 1
    assert "not readable Parquet" in inputs.skipped[0].reason


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(garbage=st.binary(max_size=300), cut=st.integers(min_value=1, max_value=600))
def test_compaction_keeps_every_good_record_beside_damaged_json_lines(
    tmp_path_factory: pytest.TempPathFactory, garbage: bytes, cut: int
) -> None:
    # A JSON-lines file of random bytes, and a good one cut short on disk: a compaction never
    # fails on them, compacts what it can read whole, and leaves the rest where it was.
    from tests.operator.reliability.history_samples import sample_events

    root = tmp_path_factory.mktemp("history")
    asyncio.run(HistoryRecorder(root).record(sample_events()))
    good = read_history(root)
    folder = next(root.glob("date=*/namespace=*"))
    whole = next(folder.glob("part-*.jsonl")).read_bytes()
    (folder / "part-0-garbage.jsonl").write_bytes(garbage)
    (folder / "part-0-cut.jsonl").write_bytes(whole[: max(1, len(whole) - cut)])

    result = compact(root, progress=lambda _: None)

    left = {Path(path).name for path, _ in result.files_left}
    assert left <= {"part-0-garbage.jsonl", "part-0-cut.jsonl"}
    for name in left:
        assert (folder / name).exists()
    compacted = [row for row in read_history(root) if row["namespace"] == folder.name[10:]]
    # Every good record is there once; a cut file read whole adds its complete lines only.
    assert len(compacted) >= len([row for row in good if row["namespace"] == folder.name[10:]])
