"""A self-signed serving certificate for the admission webhook, made with the openssl tool.

Only for an operator that runs outside the chart (the lab, a local run against a cluster): the
chart mounts a certificate that helm or cert-manager made. kopf's own generator needs packages
the operator does not otherwise use; the openssl command is on every image and machine the
operator runs on.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rebalancer.structs.errors import RebalancerError


class CertificateFailed(RebalancerError):
    """No certificate could be made: the message names the cause and the flags to use instead."""


@dataclass(frozen=True)
class CertificatePair:
    certfile: Path
    keyfile: Path


def _san(name: str) -> str:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return f"DNS:{name}"
    return f"IP:{name}"


def make_self_signed(directory: Path, names: list[str], days: int = 365) -> CertificatePair:
    """A key and a certificate valid for `names` (host names or IP addresses), which is also
    its own CA: the webhook configuration's caBundle is the certificate itself."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertificateFailed(
            "the openssl command is not installed, so no self-signed webhook certificate can "
            "be made; install openssl or pass --admission-cert and --admission-key"
        )
    directory.mkdir(parents=True, exist_ok=True)
    pair = CertificatePair(directory / "tls.crt", directory / "tls.key")
    unique = list(dict.fromkeys(name for name in names if name))
    command = [
        openssl,
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-sha256",
        "-days",
        str(days),
        "-keyout",
        str(pair.keyfile),
        "-out",
        str(pair.certfile),
        "-subj",
        f"/CN={unique[0]}",
        "-addext",
        "subjectAltName=" + ",".join(_san(name) for name in unique),
        # A CA certificate: the API server checks the chain against caBundle, which is it.
        "-addext",
        "basicConstraints=critical,CA:TRUE",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise CertificateFailed(
            f"openssl could not make the webhook certificate: {done.stderr.strip()[:300]}; "
            "pass --admission-cert and --admission-key instead"
        )
    pair.keyfile.chmod(0o600)
    return pair
