"""Per-ConsumerGroup series, kept as plain numbers and rendered into metric families at scrape.

prometheus_client keeps a child object per label set, each with its own lock and value holder:
about 36 KB per group for the operator's 40-odd per-group series, which at thousands of groups
is most of a replica's memory. Here a group's figures are a few dictionaries of floats in one
record, and a custom collector (prometheus_client's documented way to export data kept
elsewhere) turns them into the same families, names, labels and types at each scrape.
Everything runs on the operator's event loop (the /metrics handler included), so nothing here
needs a lock.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

GROUP_LABELS = ("namespace", "consumergroup", "group_id")


class Kind(Enum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


@dataclass(frozen=True)
class Family:
    """One per-group metric family: its name (counters without `_total`), help and kind; `label`
    names an extra label, and `one_hot` lists every value a one-hot gauge exports."""

    name: str
    documentation: str
    kind: Kind
    label: str | None = None
    one_hot: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()


@dataclass(slots=True)
class Buckets:
    """A histogram's counts per bucket (the last one is +Inf), not cumulative, and its sum."""

    counts: list[float]
    total: float = 0.0

    def observe(self, bounds: tuple[float, ...], value: float) -> None:
        self.counts[bisect.bisect_left(bounds, value)] += 1
        self.total += value


@dataclass(slots=True)
class GroupRecord:
    """Every per-group figure of one ConsumerGroup, keyed by family name and extra label value
    ("" without one)."""

    group_id: str
    values: dict[tuple[str, str], float] = field(default_factory=dict)
    current: dict[str, str] = field(default_factory=dict)  # one-hot family -> its value
    histograms: dict[str, Buckets] = field(default_factory=dict)


class GroupSeries:
    """The store the operator's metric functions write and the registry's collector reads."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families = tuple(families)
        self._by_name = {family.name: family for family in self.families}
        self._records: dict[tuple[str, str], GroupRecord] = {}

    def record(self, namespace: str, consumergroup: str, group_id: str) -> GroupRecord:
        """The group's record; a new Kafka group id starts a new one, so the old id's series
        do not stay beside the new ones."""
        key = (namespace, consumergroup)
        found = self._records.get(key)
        if found is None or found.group_id != group_id:
            found = self._records[key] = GroupRecord(group_id)
        return found

    def forget(self, namespace: str, consumergroup: str) -> None:
        self._records.pop((namespace, consumergroup), None)

    def histogram(self, record: GroupRecord, name: str) -> Buckets:
        """The group's histogram `name`, created empty so rate() sees its first observation."""
        found = record.histograms.get(name)
        if found is None:
            bounds = self._by_name[name].buckets
            found = record.histograms[name] = Buckets([0.0] * (len(bounds) + 1))
        return found

    def describe(self) -> Iterator[Metric]:
        for family in self.families:
            yield _empty(family)

    def collect(self) -> Iterator[Metric]:
        records = list(self._records.items())
        for family in self.families:
            metric = _empty(family)
            for (namespace, consumergroup), record in records:
                labels = (namespace, consumergroup, record.group_id)
                _add_samples(metric, family, labels, record)
            yield metric


FamilyMetric = CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily


def _empty(family: Family) -> FamilyMetric:
    labels = [*GROUP_LABELS, *((family.label,) if family.label else ())]
    if family.kind is Kind.COUNTER:
        return CounterMetricFamily(family.name, family.documentation, labels=labels)
    if family.kind is Kind.HISTOGRAM:
        return HistogramMetricFamily(family.name, family.documentation, labels=labels)
    return GaugeMetricFamily(family.name, family.documentation, labels=labels)


def _add_samples(
    metric: FamilyMetric, family: Family, labels: tuple[str, str, str], record: GroupRecord
) -> None:
    if isinstance(metric, HistogramMetricFamily):
        buckets = record.histograms.get(family.name)
        if buckets is not None:
            _add_histogram(metric, family, labels, buckets)
        return
    if family.one_hot:
        current = record.current.get(family.name)
        if current is not None:
            for choice in family.one_hot:
                metric.add_metric([*labels, choice], 1.0 if choice == current else 0.0)
        return
    for (name, extra), value in record.values.items():
        if name == family.name:
            metric.add_metric([*labels, extra] if family.label else list(labels), value)


def _add_histogram(
    metric: HistogramMetricFamily, family: Family, labels: tuple[str, str, str], buckets: Buckets
) -> None:
    cumulative, total = [], 0.0
    for bound, count in zip((*family.buckets, float("inf")), buckets.counts, strict=True):
        total += count
        cumulative.append((floatToGoString(bound), total))  # type: ignore[no-untyped-call]
    metric.add_metric(list(labels), cumulative, buckets.total)
