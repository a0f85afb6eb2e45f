"""The lab consumer's settings: the example application's (rebalancer_example_consumer.settings),
under the lab's module name."""

from rebalancer_example_consumer.settings import (
    SHOWN_PROPERTIES,
    ConsumerSettings,
    load_settings,
)

__all__ = ["SHOWN_PROPERTIES", "ConsumerSettings", "load_settings"]
