"""The secured lab broker's settings: every listener asks for a password, ACLs decide the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebalancer_lab.broker_security import (
    AUTHORIZER,
    BrokerSecurity,
    client_settings,
    listener_settings,
    scram_format_arguments,
)

SECURITY = BrokerSecurity(users={"operator": "op-secret-1"}, admin_password="admin-secret-1")


def test_repr_names_no_password() -> None:
    shown = repr(SECURITY)
    assert "op-secret-1" not in shown and "admin-secret-1" not in shown
    assert "lab-admin" in shown


def test_every_listener_asks_for_a_password_and_acls_decide() -> None:
    settings = listener_settings(SECURITY, "127.0.0.1", 9092, 9093, None, None)
    protocols = dict(
        entry.split(":") for entry in settings["listener.security.protocol.map"].split(",")
    )
    # No PLAINTEXT listener: a client without credentials has no way in.
    assert set(protocols.values()) == {"SASL_PLAINTEXT"}
    assert settings["authorizer.class.name"] == AUTHORIZER
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    assert settings["super.users"] == "User:lab-admin"
    assert settings["listener.name.sasl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512,SCRAM-SHA-256"
    assert settings["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert "TLS" not in settings["listeners"]


def test_tls_adds_a_sasl_ssl_listener_with_a_pem_keystore(tmp_path: Path) -> None:
    security = BrokerSecurity(tls=True, admin_password="a")
    settings = listener_settings(security, "127.0.0.1", 9092, 9093, 9094, tmp_path / "ks.pem")
    assert "TLS://127.0.0.1:9094" in settings["listeners"]
    assert "TLS:SASL_SSL" in settings["listener.security.protocol.map"]
    assert settings["listener.name.tls.ssl.keystore.type"] == "PEM"
    with pytest.raises(ValueError, match="TLS listener needs"):
        listener_settings(security, "127.0.0.1", 9092, 9093, None, None)


def test_users_are_formatted_with_both_mechanisms() -> None:
    arguments = scram_format_arguments(SECURITY)
    assert '--add-scram=SCRAM-SHA-512=[name="operator",password="op-secret-1"]' in arguments
    assert '--add-scram=SCRAM-SHA-256=[name="lab-admin",password="admin-secret-1"]' in arguments
    assert len(arguments) == 4


@pytest.mark.parametrize("bad", ['pass"word', "pass word", "a,b", "x]", ""])
def test_passwords_that_would_break_the_quoting_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="must be non-empty"):
        BrokerSecurity(users={"u": bad})


def test_the_super_user_is_not_a_test_user() -> None:
    with pytest.raises(ValueError, match="super user"):
        BrokerSecurity(users={"lab-admin": "x"})


def test_client_settings() -> None:
    assert client_settings("b:1", "u", "p", mechanism="SCRAM-SHA-256") == {
        "bootstrap.servers": "b:1",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "u",
        "sasl.password": "p",
    }
    assert client_settings("b:2", "u", "p", tls_ca=Path("/ca.pem"))["security.protocol"] == (
        "SASL_SSL"
    )
    with pytest.raises(ValueError, match="not PLAIN"):
        client_settings("b:1", "u", "p", mechanism="PLAIN")
