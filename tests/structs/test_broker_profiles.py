"""The one resolution of spec.kafka.profile: declared wins, auto leaves it to detection."""

from __future__ import annotations

from rebalancer.structs.brokers import BrokerProfile, resolve_profile
from rebalancer.structs.specs import BrokerProfileChoice


def test_a_declared_profile_wins_over_what_was_detected() -> None:
    declared = BrokerProfileChoice.REDPANDA.declared
    assert declared is BrokerProfile.REDPANDA
    assert resolve_profile(declared, BrokerProfile.APACHE_KAFKA) is BrokerProfile.REDPANDA
    assert resolve_profile(declared, None) is BrokerProfile.REDPANDA


def test_auto_takes_what_was_detected_as_an_enum_or_as_status_wrote_it() -> None:
    declared = BrokerProfileChoice.AUTO.declared
    assert declared is None
    assert resolve_profile(declared, BrokerProfile.REDPANDA) is BrokerProfile.REDPANDA
    assert resolve_profile(declared, "apache-kafka") is BrokerProfile.APACHE_KAFKA


def test_auto_with_nothing_detected_is_none() -> None:
    for detected in (None, "", "something-else", 3):
        assert resolve_profile(BrokerProfileChoice.AUTO.declared, detected) is None


def test_every_choice_but_auto_names_a_profile() -> None:
    named = {
        choice.declared for choice in BrokerProfileChoice if choice is not BrokerProfileChoice.AUTO
    }
    assert named == set(BrokerProfile)
