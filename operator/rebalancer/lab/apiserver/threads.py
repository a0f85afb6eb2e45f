"""ApiServerThread: the emulator on its own event loop, for synchronous callers and tests."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from .faults import Faults
from .server import ApiServer


class ApiServerThread:
    """Runs an ApiServer in a daemon thread; usable as a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, **options: Any) -> None:
        self.server = ApiServer(host=host, port=port, **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="kube-api-emulator", daemon=True)
        self._started = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def faults(self) -> Faults:
        return self.server.faults

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        return self.server.write_kubeconfig(path, namespace)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        try:
            await self.server.start()
        except BaseException as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        await self._stopped.wait()
        await self.server.stop()

    def start(self) -> ApiServerThread:
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._thread.is_alive() and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout=10)

    def __enter__(self) -> ApiServerThread:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
