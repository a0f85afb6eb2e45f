"""Pod start-up jitter: how long each pod waits before its first container starts.

On a cluster, pods of one rollout start seconds apart (scheduling, image pulls, volume mounts,
slow nodes). The lab reproduces that with a distribution sampled once per pod, in the order
the kubelet sees the pods, from a seeded generator, so a run can be repeated exactly:

    Jitter.parse("0")                  no delay
    Jitter.parse("fixed(1.5)")         1.5 s for every pod (a bare number means the same)
    Jitter.parse("uniform(0,5)")       uniform between 0 and 5 s
    Jitter.parse("exponential(2)")     exponential with a 2 s mean
    Jitter.parse("normal(3,1)")        normal, mean 3 s, standard deviation 1 s, cut at 0
    Jitter.parse("cycle(0,2.5,5)")     0, 2.5, 5, 0, 2.5, ... s: a fixed schedule, for tests that
                                       need a known spread (any k consecutive pods of a cycle of k
                                       values get every value, whatever came before them)

A pod annotated `lab.rebalancer.dev/start-delay-seconds: "2.5"` waits exactly that long instead.
A pod annotated `lab.rebalancer.dev/start-jitter: "uniform(0,20)"` draws its delay from that
distribution instead (one generator per distribution, seeded like the kubelet's), so workloads
with different spreads can run on one lab; an annotation that does not parse is ignored.
With `lab.rebalancer.dev/start-jitter-seed: "<integer>"` as well, the pods of one owner (a
StatefulSet, a ReplicaSet) draw from a generator of their own seeded with it: two workloads
with the same distribution and seed get the same delays, so strategies compared side by side
meet the same spread of starts rather than two different draws.
"""

from __future__ import annotations

import random
import re
import threading
from dataclasses import dataclass, field

DELAY_ANNOTATION = "lab.rebalancer.dev/start-delay-seconds"
JITTER_ANNOTATION = "lab.rebalancer.dev/start-jitter"
JITTER_SEED_ANNOTATION = "lab.rebalancer.dev/start-jitter-seed"
# The reason of the Event the kubelet records with each pod's delay once it has waited it.
START_DELAY_REASON = "StartDelayed"

_ARITY = {"fixed": 1, "uniform": 2, "exponential": 1, "normal": 2}
# Distributions that take any number (at least one) of parameters.
_VARIADIC = {"cycle"}
_FORM = re.compile(r"^\s*([a-z]+)\s*\(([^)]*)\)\s*$")


@dataclass
class Jitter:
    kind: str = "fixed"
    params: tuple[float, ...] = (0.0,)
    seed: int | None = 0
    _random: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)
    _drawn: int = field(init=False, repr=False, default=0)
    # The distributions pods named in JITTER_ANNOTATION (None: the text did not parse).
    _named: dict[tuple[str, str, str], Jitter | None] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if self.kind in _VARIADIC:
            if not self.params:
                raise ValueError(f"{self.kind} takes one or more parameters")
        elif self.kind not in _ARITY:
            raise ValueError(f"unknown jitter distribution {self.kind!r}: use one of {_names()}")
        elif len(self.params) != _ARITY[self.kind]:
            raise ValueError(f"{self.kind} takes {_ARITY[self.kind]} parameter(s)")
        if any(p < 0 for p in self.params):
            raise ValueError(f"{self.describe()}: parameters must not be negative")
        if self.kind == "uniform" and self.params[0] > self.params[1]:
            raise ValueError(f"{self.describe()}: the lower bound is above the upper bound")
        if self.kind == "exponential" and self.params[0] == 0:
            raise ValueError("exponential(mean) needs a mean above 0; use fixed(0) for none")
        self._random = random.Random(self.seed)

    @classmethod
    def parse(cls, text: str | float | Jitter | None, seed: int | None = 0) -> Jitter:
        if isinstance(text, Jitter):
            return text
        if text is None:
            return cls(seed=seed)
        if isinstance(text, int | float):
            return cls("fixed", (float(text),), seed)
        stripped = text.strip()
        try:
            return cls("fixed", (float(stripped),), seed)
        except ValueError:
            pass
        match = _FORM.match(stripped)
        if not match:
            raise ValueError(
                f"cannot read jitter {text!r}: write a number of seconds or one of "
                "fixed(s), uniform(a,b), exponential(mean), normal(mu,sigma), cycle(s1,s2,...)"
            )
        kind, raw = match.group(1), match.group(2)
        try:
            params = tuple(float(p) for p in raw.split(",")) if raw.strip() else ()
        except ValueError as exc:
            raise ValueError(f"cannot read jitter {text!r}: parameters must be numbers") from exc
        return cls(kind, params, seed)

    def describe(self) -> str:
        return f"{self.kind}({','.join(f'{p:g}' for p in self.params)})"

    def sample(self) -> float:
        with self._lock:
            if self.kind == "fixed":
                return self.params[0]
            if self.kind == "cycle":
                value = self.params[self._drawn % len(self.params)]
                self._drawn += 1
                return value
            if self.kind == "uniform":
                return self._random.uniform(*self.params)
            if self.kind == "exponential":
                return self._random.expovariate(1.0 / self.params[0])
            return max(0.0, self._random.gauss(*self.params))

    def delay_for(self, annotations: dict[str, str] | None, owner: str = "") -> float:
        """The pod's own annotated delay, else a sample of its annotated distribution (of its
        owner's seeded generator when it names a seed), else the next sample."""
        annotations = annotations or {}
        value = annotations.get(DELAY_ANNOTATION)
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                pass
        named = self._distribution(
            annotations.get(JITTER_ANNOTATION), annotations.get(JITTER_SEED_ANNOTATION), owner
        )
        return (named or self).sample()

    def _distribution(self, text: str | None, seed_text: str | None, owner: str) -> Jitter | None:
        if text is None:
            return None
        seed: int | None = self.seed
        if seed_text is not None:
            try:
                seed = int(seed_text)
            except ValueError:
                seed_text = None  # not a seed: the shared generator, as without one
        key = (text, seed_text or "", owner if seed_text else "")
        with self._lock:
            if key not in self._named:
                try:
                    self._named[key] = Jitter.parse(text, seed)
                except ValueError:
                    self._named[key] = None
            return self._named[key]


def _names() -> str:
    return ", ".join([*_ARITY, *sorted(_VARIADIC)])
