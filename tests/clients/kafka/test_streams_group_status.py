"""A running Kafka Streams 4.4 application's streams group as the observer reads and reports it
on Apache Kafka 4.4: librdkafka's view sends it to ListGroups by type, StreamsGroupDescribe gives
status.group its members, epoch and tasks (reconcilers/observing.py, planning/streams_observing)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafka_support import eventually, fresh

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.streams_groups import read_streams_group
from rebalancer.planning.rebalances import GroupTracking
from rebalancer.planning.statuses import render_group
from rebalancer.planning.streams_observing import (
    group_tasks,
    may_be_a_streams_group,
    render_streams_group,
    streams_snapshot,
)
from rebalancer.structs.streams_groups import StreamsGroupView
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.streams_app import StreamsApp

PARTITIONS = 4


def test_a_streams_group_is_observed_with_its_tasks(kafka: KafkaBroker, tmp_path: Path) -> None:
    config = {"bootstrap.servers": kafka.bootstrap}
    app_id, source, sink = fresh("observed-upper"), fresh("words"), fresh("upper")
    for topic in (source, sink):
        asyncio.run(ensure_topic(kafka.bootstrap, topic, PARTITIONS))
    with StreamsApp(kafka.bootstrap, app_id, source, sink, tmp_path) as app:
        app.wait_running()

        def settled() -> StreamsGroupView | None:
            view = asyncio.run(read_streams_group(config, app_id))
            return view if view is not None and view.settled and view.members else None

        described = eventually(settled, 60, "the streams group settles", 0.5)
        gateway = AdminGateway(config)
        try:
            seen_by_librdkafka = asyncio.run(gateway.describe_group(app_id))
        finally:
            gateway.close()
        assert may_be_a_streams_group(seen_by_librdkafka)

        snapshot = streams_snapshot(described, PARTITIONS, 0.0)
        group = render_streams_group(render_group(snapshot, GroupTracking(0.0), None), described)
        assert (group["protocol"], group["state"], group["members"]) == ("streams", "Stable", 1)
        assert group["generation"] == described.group_epoch > 0
        assert (group["activeTasks"], group["standbyTasks"], group["warmupTasks"]) == (4, 0, 0)
        assert group_tasks(described).by_kind()["active"] == PARTITIONS
    # A group the broker does not list as a streams group is not described as one.
    assert asyncio.run(read_streams_group(config, fresh("no-such-app"))) is None
