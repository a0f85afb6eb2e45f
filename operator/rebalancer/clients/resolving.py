"""Turn a ConsumerGroup's Kafka spec into client settings, reading Secrets on the way.

Secret values only ever live in the returned SecuritySettings (whose repr hides them); no
message built here quotes a value.
"""

from __future__ import annotations

import asyncio
import base64

from kubernetes.client.exceptions import ApiException

from rebalancer.clients.kubernetes_api import KubernetesApi, PermissionDenied
from rebalancer.structs.brokers import SecuritySettings
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.specs import KafkaSpec, SecretKeyRef


class SecretUnavailable(RebalancerError):
    """A referenced Secret or key is missing or unreadable; the message names which and why."""


async def read_secret_key(api: KubernetesApi, namespace: str, ref: SecretKeyRef, field: str) -> str:
    try:
        secret = await asyncio.to_thread(api.core.read_namespaced_secret, ref.name, namespace)
    except ApiException as error:
        if error.status == 404:
            raise SecretUnavailable(
                f"Secret {namespace}/{ref.name} (from {field}) does not exist; create it or fix "
                f"{field}.name"
            ) from None
        if isinstance(error, PermissionDenied):
            raise  # a missing grant: the handler names it (get secrets in this namespace)
        raise SecretUnavailable(
            f"reading Secret {namespace}/{ref.name} failed with HTTP {error.status}"
        ) from None
    data = secret.data or {}
    if ref.key not in data:
        raise SecretUnavailable(
            f"Secret {namespace}/{ref.name} has no key {ref.key!r} (from {field}); add the key or "
            f"fix {field}"
        )
    return base64.b64decode(data[ref.key]).decode("utf-8")


async def resolve_security(
    api: KubernetesApi | None, namespace: str, kafka: KafkaSpec
) -> SecuritySettings | None:
    if kafka.tls is None and kafka.sasl is None:
        return None
    if api is None:
        raise SecretUnavailable("no Kubernetes API to read Secrets from")
    tls = kafka.tls if kafka.tls is not None and kafka.tls.enabled else None
    ca = cert = key = None
    base = "spec.kafka.tls"
    if tls is not None:
        if tls.ca is not None:
            ca = await read_secret_key(api, namespace, tls.ca, f"{base}.caSecretRef")
        if tls.client_cert is not None:
            cert = await read_secret_key(
                api, namespace, tls.client_cert, f"{base}.clientCertSecretRef"
            )
        if tls.client_key is not None:
            key = await read_secret_key(
                api, namespace, tls.client_key, f"{base}.clientCertSecretRef"
            )
    username = password = mechanism = None
    if kafka.sasl is not None:
        sasl = "spec.kafka.sasl"
        username = await read_secret_key(
            api, namespace, kafka.sasl.username, f"{sasl}.usernameSecretRef"
        )
        password = await read_secret_key(
            api, namespace, kafka.sasl.password, f"{sasl}.passwordSecretRef"
        )
        mechanism = kafka.sasl.mechanism.value
    if tls is not None:
        protocol = "SASL_SSL" if kafka.sasl is not None else "SSL"
    else:
        protocol = "SASL_PLAINTEXT" if kafka.sasl is not None else "PLAINTEXT"
    return SecuritySettings(
        protocol=protocol,
        sasl_mechanism=mechanism,
        username=username,
        password=password,
        ca_pem=ca,
        cert_pem=cert,
        key_pem=key,
        skip_verify=bool(tls and tls.insecure_skip_verify),
    )
