"""Why a Kafka cluster could not be used, as the reasons of status conditions name it."""

from __future__ import annotations

from enum import StrEnum


class KafkaProblem(StrEnum):
    UNREACHABLE = "KafkaUnreachable"  # refused, unresolved, timed out, gone
    AUTHENTICATION = "KafkaAuthenticationFailed"  # the SASL user name or password was refused
    TLS = "KafkaTLSFailed"  # the TLS handshake failed (an unknown CA, a name mismatch)
    # The client's security protocol is not the listener's (TLS or SASL on one side only).
    SECURITY_MISMATCH = "KafkaSecurityMismatch"
    NOT_AUTHORIZED = "KafkaNotAuthorized"  # the principal lacks an ACL the request needs
    REQUEST_FAILED = "KafkaRequestFailed"  # the cluster answered, and said no for another cause
    # The cluster answers, but no broker coordinates the group yet (one was lost, and Kafka has
    # not named another).
    COORDINATOR_UNAVAILABLE = "KafkaCoordinatorUnavailable"
