"""A Kubernetes API emulator good enough for kopf, the `kubernetes` client and kubectl.

    server = ApiServer(host="127.0.0.1", port=0)      # port 0: a free port
    await server.start()
    server.url                                        # "http://127.0.0.1:PORT"
    server.write_kubeconfig(path, namespace="default")  # context "rebalancer-lab", plain HTTP
    server.faults.inject(method="PATCH", path_regex="/status$", status=409, times=2)
    server.faults.drop_watches()
    await server.stop()

    with ApiServerThread(host="127.0.0.1", port=0) as server:  # own loop, daemon thread
        ...

    await serve(host, port, kubeconfig_path)          # runs until cancelled

Other processes inject faults through `POST/GET/DELETE /_emulator/faults` (JSON with
status, method, path_regex, times, message, retry_after) and `POST /_emulator/drop-watches`.

What it is: one in-memory cluster with kube-apiserver's discovery (legacy and aggregated),
OpenAPI v3 (so kubectl validates on the server), generic storage of the built-in kinds in
`builtins.py`, CRDs with structural-schema pruning, defaulting, validation and CEL rules,
status and scale subresources, merge/JSON/strategic/apply patches, finalizers, namespace and
CRD cascades, background garbage collection by ownerReferences, watches with history replay,
410 Expired and bookmarks, meta.k8s.io Tables, and kube's Status bodies for every error.

What it is not: there are no controllers (Deployments make no Pods, nothing rolls out),
no admission webhooks, no RBAC or authentication (tokens are accepted and ignored; access
reviews always allow), no conversion webhooks (CRD versions convert by apiVersion only), no
schemas for built-in kinds (their fields are neither validated nor pruned), no
managedFields (server-side apply remembers each manager's last configuration and never
reports conflicts), no pods/log, exec or port-forward, and protobuf request bodies are only
understood for the messages kubectl's typed `create` commands send (see `protobuf.py`).
"""

from .server import ApiServer, serve
from .threads import ApiServerThread

__all__ = ["ApiServer", "ApiServerThread", "serve"]
