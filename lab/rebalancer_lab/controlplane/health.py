"""Waiting for the control plane's endpoints: polling of health URLs."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def client_context(
    ca_file: str | None, cert_file: str | None, key_file: str | None
) -> ssl.SSLContext:
    """TLS for health checks: verified against our CA when given one, else unverified (the
    controller manager and scheduler serve self-signed certificates of their own)."""
    if ca_file is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=ca_file)
    if cert_file is not None:
        context.load_cert_chain(cert_file, key_file)
    return context


def probe(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> tuple[int, str]:
    """Status and body of GET url; status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except (OSError, ssl.SSLError):
        return 0, ""


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    alive: Callable[[], None],
    interval: float = 0.2,
) -> bool:
    """Poll `check` until it is true or `timeout` passes; `alive` raises if the process died."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        alive()
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
