"""A Kafka Connect-style group (protocol type `connect`): a group the sidecar cannot join.

No Connect worker runs here; one member joins with Connect's protocol type and protocol name
through aiokafka's protocol calls and stays until told to leave, which is all the broker knows of
a Connect group.
"""

from __future__ import annotations

import asyncio

from aiokafka.client import AIOKafkaClient, ConnectionGroup, CoordinationType
from aiokafka.protocol.group import JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest


async def hold_connect_group(bootstrap: str, group_id: str, hold: asyncio.Event) -> None:
    """One member of a Kafka Connect-style group (protocol type `connect`) until `hold` is set."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id="connect-worker")
    await client.bootstrap()
    node = await client.coordinator_lookup(CoordinationType.GROUP, group_id)

    def join(member: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id, 30000, 30000, member, None, "connect", [("sessioned", b"\x00\x01")]
        )

    first = await client.send(node, join(""), group=ConnectionGroup.COORDINATION)
    joined = await client.send(node, join(first.member_id), group=ConnectionGroup.COORDINATION)
    assert joined.error_code == 0, joined
    synced = await client.send(
        node,
        SyncGroupRequest(
            group_id, joined.generation_id, joined.member_id, None, [(joined.member_id, b"")]
        ),
        group=ConnectionGroup.COORDINATION,
    )
    assert synced.error_code == 0, synced
    await hold.wait()
    await client.send(node, LeaveGroupRequest(group_id, joined.member_id))
    await client.close()
