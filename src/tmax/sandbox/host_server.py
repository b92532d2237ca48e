"""A TCP server on the host that counts who reaches it: the red team's and the
preflight's proof that a sandbox with network does not reach the host."""

from __future__ import annotations

import contextlib
import socket
import threading


class HostServer:
    """A TCP server on the host that counts the connections reaching it and answers each
    with ``reply``: on every address (dual-stack where the host has IPv6, the loopback
    included) unless ``host`` names one."""

    def __init__(self, host: str = "", reply: bytes = b"") -> None:
        dual = not host and socket.has_dualstack_ipv6()
        family = socket.AF_INET6 if dual else socket.AF_INET
        self.socket = socket.create_server((host, 0), family=family, dualstack_ipv6=dual)
        self.socket.settimeout(0.2)
        self.port: int = self.socket.getsockname()[1]
        self.reply = reply
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.socket.accept()
            except OSError:
                continue
            self.connections += 1
            with contextlib.suppress(OSError):
                conn.sendall(self.reply)
            conn.close()

    def __enter__(self) -> HostServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()
