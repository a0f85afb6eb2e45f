"""The sidecar's HTTP layer with a stand-in engine: token, rate limit, body, refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from rebalancer.sidecar.agent import EnforceAnswer, NotAMember, UnknownGroup
from rebalancer.sidecar.limits import RateLimiter
from rebalancer.sidecar.server import TokenFile, build_app
from rebalancer.structs.enforcement import EnforceStatus

TOKEN = "s3cret-token"


class FakeEngine:
    group_id = "orders"

    def __init__(self) -> None:
        self.submitted: list[tuple[str, str, str, bool, float]] = []

    async def submit(self, group_id, request_id, reason, retry_when_stable, wait_seconds):
        if group_id == "ghost":
            raise UnknownGroup("group 'ghost' does not exist on the cluster")
        if group_id != self.group_id:
            raise NotAMember(f"this sidecar is a member of group 'orders', not of {group_id!r}")
        self.submitted.append((group_id, request_id, reason, retry_when_stable, wait_seconds))
        status = EnforceStatus.ENFORCED if request_id != "busy" else EnforceStatus.IN_PROGRESS
        return EnforceAnswer(request_id, status, will_retry=retry_when_stable, generation=4)

    def lookup(self, request_id):
        return EnforceAnswer(request_id, EnforceStatus.ENFORCED) if request_id == "r1" else None

    def health(self):
        return True, {"groupId": self.group_id}

    def describe(self):
        return {"groupId": self.group_id, "generation": 4}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[TestClient, FakeEngine, Clock, Path]]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    engine, clock = FakeEngine(), Clock()
    app = build_app(engine, TokenFile(token_file), RateLimiter(6, 2, clock))
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        yield client, engine, clock, token_file
    finally:
        await client.close()


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


BODY = {"groupId": "orders", "requestId": "r1", "reason": "test"}


@pytest.mark.parametrize(
    "headers",
    [{}, auth("wrong"), auth(TOKEN + "x"), {"Authorization": TOKEN}, {"Authorization": "Basic x"}],
)
async def test_missing_or_wrong_token_is_refused_and_nothing_happens(served, headers) -> None:
    client, engine, _, _ = served
    response = await client.post("/v1/enforce", json=BODY, headers=headers)
    assert response.status == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert "token" in (await response.json())["error"]
    assert engine.submitted == []
    assert (await client.get("/v1/group", headers=headers)).status == 401
    assert (await client.get("/v1/enforce/r1", headers=headers)).status == 401


async def test_an_accepted_request_reaches_the_engine(served) -> None:
    client, engine, _, _ = served
    response = await client.post(
        "/v1/enforce", json={**BODY, "retryWhenStable": True, "waitSeconds": 12}, headers=auth()
    )
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "enforced" and body["generation"] == 4
    assert engine.submitted == [("orders", "r1", "test", True, 12.0)]


async def test_an_answer_still_under_way_is_202(served) -> None:
    client, _, _, _ = served
    response = await client.post(
        "/v1/enforce", json={**BODY, "requestId": "busy", "retryWhenStable": True}, headers=auth()
    )
    assert response.status == 202
    assert (await response.json())["status"] == "in-progress"


@pytest.mark.parametrize(
    ("group", "status", "words"),
    [("ghost", 404, "does not exist"), ("payments", 409, "not of 'payments'")],
)
async def test_groups_the_sidecar_does_not_serve(served, group, status, words) -> None:
    client, engine, _, _ = served
    response = await client.post("/v1/enforce", json={**BODY, "groupId": group}, headers=auth())
    assert response.status == status
    body = await response.json()
    assert words in body["error"] and body["groupId"] == "orders"
    assert engine.submitted == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"requestId": "r1"}, "groupId"),
        ({"groupId": "orders"}, "requestId"),
        ({"groupId": "orders", "requestId": "has space"}, "requestId"),
        ({"groupId": "orders", "requestId": "r" * 129}, "requestId"),
        ({**BODY, "retryWhenStable": "yes"}, "retryWhenStable"),
        ({**BODY, "waitSeconds": 1000}, "waitSeconds"),
        ({**BODY, "reason": 5}, "reason"),
    ],
)
async def test_bad_bodies_name_the_field(served, body, field) -> None:
    client, engine, _, _ = served
    response = await client.post("/v1/enforce", json=body, headers=auth())
    assert response.status == 400
    assert (await response.json())["field"] == field
    assert engine.submitted == []


async def test_not_json(served) -> None:
    client, _, _, _ = served
    response = await client.post("/v1/enforce", data=b"{", headers=auth())
    assert response.status == 400


async def test_rate_limit_answers_429_with_retry_after(served) -> None:
    client, engine, clock, _ = served
    for number in range(2):
        ok = await client.post(
            "/v1/enforce", json={**BODY, "requestId": f"r{number}"}, headers=auth()
        )
        assert ok.status == 200
    limited = await client.post("/v1/enforce", json={**BODY, "requestId": "r9"}, headers=auth())
    assert limited.status == 429
    assert limited.headers["Retry-After"] == "10"  # 6 per minute: one every 10 s
    assert len(engine.submitted) == 2
    clock.now += 10
    assert (await client.post("/v1/enforce", json=BODY, headers=auth())).status == 200


async def test_a_rotated_token_takes_effect(served) -> None:
    client, _, _, token_file = served
    token_file.write_text("rotated-token-value")
    assert (await client.post("/v1/enforce", json=BODY, headers=auth())).status == 401
    assert (
        await client.post("/v1/enforce", json=BODY, headers=auth("rotated-token-value"))
    ).status == 200


async def test_status_group_health_and_metrics(served) -> None:
    client, _, _, _ = served
    assert (await (await client.get("/v1/enforce/r1", headers=auth())).json())[
        "status"
    ] == "enforced"
    assert (await client.get("/v1/enforce/nope", headers=auth())).status == 404
    assert (await (await client.get("/v1/group", headers=auth())).json())["generation"] == 4
    assert (await client.get("/healthz")).status == 200
    text = await (await client.get("/metrics")).text()
    assert "rebalancer_sidecar_requests_total" in text
    assert 'answer="unauthorized"' in text


def test_rate_limiter_refills() -> None:
    clock = Clock()
    limiter = RateLimiter(60, 1, clock)
    assert limiter.take() == 0
    assert limiter.take() == pytest.approx(1.0)
    clock.now = 0.5
    assert limiter.take() == pytest.approx(0.5)
    clock.now = 1.0
    assert limiter.take() == 0
