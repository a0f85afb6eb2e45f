"""The lab consumer's eager path and its `lost` report, with a real frozen process."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from kafka_support import Fleet, ReportCollector, eventually, fresh, partitions_of

from rebalancer_lab.producer import ensure_topic


def test_a_frozen_eager_member_reports_lost_then_rejoins(bootstrap: str, tmp_path: Path) -> None:
    topic = fresh("eager")
    asyncio.run(ensure_topic(bootstrap, topic, 2))
    everything = {(topic, 0), (topic, 1)}
    collector = ReportCollector("t").start()
    fleet = Fleet(bootstrap, tmp_path)
    try:
        member = fleet.start(
            "eager-0",
            fresh("eager"),
            topic,
            KAFKA_PARTITION_ASSIGNMENT_STRATEGY="range",
            REBALANCER_REPORT_URL=collector.url,
            REBALANCER_REPORT_TOKEN="t",
            REBALANCER_REPORT_INTERVAL_S="1",
        )
        first = eventually(
            lambda: collector.reports("eager-0", "assigned"), 20, "eager-0 is assigned"
        )[0]
        assert partitions_of(first) == everything
        assert first["assignmentStrategy"] == "range"

        # Frozen past its 6 s session: the member finds itself expelled when it thaws.
        os.kill(member.process.pid, signal.SIGSTOP)
        time.sleep(7.5)
        os.kill(member.process.pid, signal.SIGCONT)

        again = eventually(
            lambda: [
                report
                for report in collector.reports("eager-0", "assigned")
                if report["generation"] > first["generation"]
            ],
            30,
            "eager-0 rejoins in a new generation",
        )[0]
        events = [r["event"] for r in collector.reports("eager-0") if r["event"] != "heartbeat"]
        assert events[:3] == ["assigned", "lost", "assigned"]
        lost = collector.reports("eager-0", "lost")[0]
        assert lost["partitions"] == []
        assert partitions_of(again) == everything
        assert member.stop() == 0
        assert "lost generation=" in member.output()
    finally:
        fleet.kill_all()
        collector.close()
