"""A secured lab broker: SASL/SCRAM listeners, ACLs enforced by StandardAuthorizer, optional TLS.

`KafkaCluster(security=BrokerSecurity(...))` starts every node with:

- `SASL` (SASL_PLAINTEXT) on the node's port, SCRAM-SHA-512 and SCRAM-SHA-256: what clients use,
  and what the broker itself uses to talk to the other brokers (as the super user);
- `TLS` (SASL_SSL, the same mechanisms) on a second port when `tls` is set, with a certificate
  signed by a CA the lab makes with the openssl CLI (`ca_pem`); clients verify it;
- `CONTROLLER` (SASL_PLAINTEXT, PLAIN): KRaft's controllers cannot take SCRAM (its credentials
  live in the very metadata log the controllers serve), so the super user's name and password
  are in the listener's JAAS settings instead. No listener is open without a password, so no
  test can reach the broker by a back door and pass by luck;
- `authorizer.class.name=StandardAuthorizer` and `allow.everyone.if.no.acl.found=false`: a user
  may do only what an ACL grants (the super user, the lab's own, may do everything).

SCRAM users (each with both mechanisms) are written into the metadata log when the storage is
formatted (`kafka-storage format --add-scram`), so they exist from the first request on; more
can be added later through the admin API (`KafkaCluster.add_user`). ACLs are made through the
admin API (`KafkaCluster.grant`, `revoke`), as an administrator would.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SASL_LISTENER = "SASL"
TLS_LISTENER = "TLS"
CONTROLLER_LISTENER = "CONTROLLER"
# Names and passwords go into JAAS strings and the storage tool's --add-scram argument, both
# quoted with '"': these characters could end the quote or the list, so they are refused.
_SAFE = re.compile(r'^[^\s"\\,\[\];=]+$')
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _checked(what: str, value: str) -> str:
    if not _SAFE.match(value):
        raise ValueError(
            f'a lab broker {what} must be non-empty without spaces or any of " \\ , [ ] ; ='
        )
    return value


@dataclass(frozen=True)
class BrokerSecurity:
    """What a secured lab broker enforces. Passwords never appear in repr()."""

    # SCRAM users made at format time, name -> password, each for both mechanisms.
    users: Mapping[str, str] = field(default_factory=dict, repr=False)
    tls: bool = False
    admin_user: str = "lab-admin"
    admin_password: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)

    def __post_init__(self) -> None:
        _checked("user name", self.admin_user)
        _checked("password", self.admin_password)
        for name, password in self.users.items():
            _checked("user name", name)
            _checked("password", password)
        if self.admin_user in self.users:
            raise ValueError(f"{self.admin_user!r} is the lab's super user; pick another name")

    @property
    def user_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.users))

    def all_users(self) -> dict[str, str]:
        return {self.admin_user: self.admin_password, **self.users}


def scram_format_arguments(security: BrokerSecurity) -> list[str]:
    """`kafka-storage format` arguments that create every user with both SCRAM mechanisms."""
    arguments: list[str] = []
    for name, password in security.all_users().items():
        for mechanism in SCRAM_MECHANISMS:
            arguments.append(f'--add-scram={mechanism}=[name="{name}",password="{password}"]')
    return arguments


def _scram_login(user: str, password: str) -> str:
    return f'{_SCRAM_MODULE} required username="{user}" password="{password}";'


def listener_settings(
    security: BrokerSecurity,
    host: str,
    port: int,
    controller_port: int,
    tls_port: int | None,
    keystore: Path | None,
) -> dict[str, str]:
    """The server.properties entries of one secured node (listeners, SASL, authorizer)."""
    mechanisms = ",".join(SCRAM_MECHANISMS)
    admin, password = security.admin_user, security.admin_password
    listeners = [f"{SASL_LISTENER}://{host}:{port}"]
    advertised = [f"{SASL_LISTENER}://{host}:{port}"]
    protocols = [f"{SASL_LISTENER}:SASL_PLAINTEXT", f"{CONTROLLER_LISTENER}:SASL_PLAINTEXT"]
    if security.tls:
        if tls_port is None or keystore is None:
            raise ValueError("a TLS listener needs its port and keystore")
        listeners.append(f"{TLS_LISTENER}://{host}:{tls_port}")
        advertised.append(f"{TLS_LISTENER}://{host}:{tls_port}")
        protocols.append(f"{TLS_LISTENER}:SASL_SSL")
    listeners.append(f"{CONTROLLER_LISTENER}://{host}:{controller_port}")
    settings = {
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(protocols),
        "controller.listener.names": CONTROLLER_LISTENER,
        "inter.broker.listener.name": SASL_LISTENER,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{admin}",
        f"listener.name.{SASL_LISTENER.lower()}.sasl.enabled.mechanisms": mechanisms,
        f"listener.name.{CONTROLLER_LISTENER.lower()}.sasl.enabled.mechanisms": "PLAIN",
        # The controller listener checks PLAIN passwords against its own user_<name> entries,
        # and the node logs in to its controller with the same name and password.
        f"listener.name.{CONTROLLER_LISTENER.lower()}.plain.sasl.jaas.config": (
            f'{_PLAIN_MODULE} required username="{admin}" password="{password}" '
            f'user_{admin}="{password}";'
        ),
    }
    # The inter-broker listener's login: the node speaks to other nodes as the super user.
    for mechanism in SCRAM_MECHANISMS:
        key = f"listener.name.{SASL_LISTENER.lower()}.{mechanism.lower()}.sasl.jaas.config"
        settings[key] = _scram_login(admin, password)
    if security.tls:
        assert keystore is not None
        tls = TLS_LISTENER.lower()
        settings[f"listener.name.{tls}.sasl.enabled.mechanisms"] = mechanisms
        for mechanism in SCRAM_MECHANISMS:
            settings[f"listener.name.{tls}.{mechanism.lower()}.sasl.jaas.config"] = (
                f"{_SCRAM_MODULE} required;"
            )
        # KIP-651: a PEM file holding the private key and the certificate chain.
        settings[f"listener.name.{tls}.ssl.keystore.type"] = "PEM"
        settings[f"listener.name.{tls}.ssl.keystore.location"] = str(keystore)
    return settings


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA certificate clients trust
    keystore: Path  # the brokers' key and certificate, PEM


def make_certificates(folder: Path, host: str) -> TlsFiles:
    """A CA of the lab's own and one broker certificate it signs, valid for `host` (an IP
    address or a name) and localhost; made once per folder with the openssl CLI."""
    files = TlsFiles(folder / "ca.pem", folder / "broker-keystore.pem")
    if files.ca.exists() and files.keystore.exists():
        return files
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, key, request = folder / "ca.key", folder / "broker.key", folder / "broker.csr"
    certificate, extensions = folder / "broker.pem", folder / "broker.ext"
    try:
        ipaddress.ip_address(host)
        names = {f"IP:{host}", "IP:127.0.0.1", "DNS:localhost"}
    except ValueError:
        names = {f"DNS:{host}", "IP:127.0.0.1", "DNS:localhost"}
    extensions.write_text(f"subjectAltName={','.join(sorted(names))}\n")
    new_key = ["-newkey", "rsa:2048", "-nodes"]
    steps = [
        ["req", "-x509", *new_key, "-days", "30", "-keyout", str(ca_key), "-out", str(files.ca)],
        ["req", *new_key, "-keyout", str(key), "-out", str(request), "-subj", f"/CN={host}"],
        ["x509", "-req", "-in", str(request), "-CA", str(files.ca), "-CAkey", str(ca_key)],
    ]
    steps[0] += ["-subj", "/CN=rebalancer-lab-ca"]
    steps[2] += ["-CAcreateserial", "-days", "30", "-out", str(certificate)]
    steps[2] += ["-extfile", str(extensions)]
    for step in steps:
        done = subprocess.run(["openssl", *step], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {step[0]} failed: {done.stderr.strip()[-1000:]}")
    # The key is PKCS#8 and unencrypted (openssl 3's default), which Kafka's PEM store reads.
    files.keystore.write_text(key.read_text() + certificate.read_text())
    return files


def client_settings(
    bootstrap: str,
    user: str,
    password: str,
    *,
    mechanism: str = "SCRAM-SHA-512",
    tls_ca: Path | None = None,
) -> dict[str, str]:
    """librdkafka properties of a client of a secured lab broker."""
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"the lab broker speaks {' and '.join(SCRAM_MECHANISMS)}, not {mechanism}")
    settings = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL" if tls_ca is not None else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if tls_ca is not None:
        settings["ssl.ca.location"] = str(tls_ca)
    return settings
