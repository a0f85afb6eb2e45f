"""A Kubernetes API emulator good enough for kopf, the `kubernetes` client and kubectl.

server = ApiServer(host="127.0.0.1", port=0)
await server.start()
server.write_kubeconfig(path, namespace="default")
await server.stop()

with ApiServerThread() as server:   # its own event loop in a daemon thread
    ...
"""

from .server import ApiServer, serve
from .threads import ApiServerThread

__all__ = ["ApiServer", "ApiServerThread", "serve"]
