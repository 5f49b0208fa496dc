"""Dask checks that keep the cluster path from waiting for ever: is there a Dask scheduler at an address
(:func:`probe_scheduler`), does a connection finish in time (:func:`within`), and do the workers keep dying
before they finish a chunk (:class:`LostWorkers`).

distributed's own settings do not replace them (measured, distributed 2026.11): ``Client(timeout="2s")``
waited over 40 s at an HTTP server or a silent listener and raised numpy's ``MemoryError`` at another
protocol's bytes; a SIGSTOPped scheduler's ``nthreads``, ``scheduler_info``, ``get_events`` waited over 20 s;
``allowed-failures = 1`` never ended a run whose workers die as they start (21 lost in 90 s): a worker gets
tasks only once it has started, so it is never charged with one."""
from __future__ import annotations

import socket
import struct
import threading
import time

from tabsim.runtime.executors import ExecutorError


PROBE_SECONDS = 5.0  # a Dask scheduler greets a new connection at once (its handshake), well within this
# the longest the scheduler is waited for (--dask-timeout): to connect, to answer a question, to close
SCHEDULER_SECONDS = 30.0
HANDSHAKE_MAX = 1 << 16  # bytes: a scheduler's greeting is about 60; more is another service's data


def probe_scheduler(address: str, timeout: float | None = None) -> None:
    """Refuse, within ``timeout`` seconds (default :data:`PROBE_SECONDS`), an address where no Dask
    scheduler answers.

    Over ``tcp://`` a Dask server sends its handshake (8 bytes giving the length of a short msgpack
    message naming ``compression``, ``python`` and ``pickle-protocol``) as soon as a connection opens. A
    port where nothing listens, a listener that never speaks (an HTTP server waits for a request) and a
    service that sends other bytes are refused here with one line naming the address, instead of hanging
    in the client or reading another protocol's bytes as a frame length (numpy's "Unable to allocate 3.07
    EiB"). Other schemes (tls, ws, ...) are not probed; the client's connection then has a deadline.

    Raises:
      ExecutorError: naming the address and what was found there.
    """
    scheme, _, rest = address.partition("://")
    if scheme != "tcp":
        return
    timeout = PROBE_SECONDS if timeout is None else timeout
    host, _, port = rest.rstrip("/").rpartition(":")
    host = host.strip("[]")
    where = f"--scheduler {address}"
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except socket.timeout:
        raise ExecutorError(f"{where}: no answer to a connection within {timeout:g} s (a firewall, or a host "
                            "that is down); expected a Dask scheduler, e.g. tcp://10.0.0.5:8786") from None
    except OSError as err:
        raise ExecutorError(f"{where}: cannot connect ({err.strerror or err}); is the Dask scheduler running "
                            "there (dask scheduler --port PORT)?") from None
    deadline = time.monotonic() + timeout

    def read(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout
            sock.settimeout(left)
            part = sock.recv(n - len(buf))
            if not part:
                raise ConnectionResetError
            buf += part
        return buf

    try:
        with sock:
            head = read(8)
            (size,) = struct.unpack("<Q", head)
            body = read(size) if 0 < size <= HANDSHAKE_MAX else b""
    except socket.timeout:
        raise ExecutorError(f"{where}: something listens there but sent no Dask greeting within {timeout:g} s "
                            "(an HTTP server such as the dashboard, or another service); give the scheduler's "
                            "own port (8786 by default)") from None
    except OSError:
        raise ExecutorError(f"{where}: the connection was closed without a Dask greeting; not a Dask "
                            "scheduler (give the scheduler's own port, 8786 by default)") from None
    if not body or b"pickle-protocol" not in body or b"python" not in body:
        shown = (head + body)[:16]
        raise ExecutorError(f"{where}: answered with bytes that are not Dask's protocol ({shown!r}); not a Dask "
                            "scheduler (give the scheduler's own port, 8786 by default)")


def within(seconds: float, what: str, fn, *, message: str | None = None):
    """``fn()`` in a helper thread, or :class:`ExecutorError` naming ``what`` (else saying ``message``) when
    it takes longer than ``seconds`` (a connection that neither succeeds nor fails is not waited for)."""
    box: dict = {}

    def call():
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001  (re-raised in the caller's thread)
            box["error"] = err

    t = threading.Thread(target=call, name="tabsim-dask-connect", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise ExecutorError(message or f"{what}: no Dask scheduler answered within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


MAX_RESTARTS = 3  # per worker: workers lost (and restarted by their nannies) with no chunk finished meanwhile
CHECK_SECONDS = 1.0


class LostWorkers:
    """Counts the workers the scheduler lost since the last chunk finished (its ``remove-worker`` events), so
    that workers that die as they start (restarted by their nannies again and again) end the run with a
    message instead of waiting for ever: :data:`MAX_RESTARTS` per worker (at least 6) are tolerated."""

    def __init__(self, ex):
        self.ex, self.at = ex, 0.0
        self.n_workers = max(1, ex.workers or len(ex._cpus) or ex.threads)
        self.t0 = time.monotonic()
        self.base = self._count()

    def _count(self) -> int | None:
        try:
            events = self.ex.ask(self.ex.client.get_events, "all")
        except ExecutorError:  # the scheduler answered nothing in time: the run ends, in one line
            raise
        except Exception:  # noqa: BLE001  (the scheduler is busy or gone: the next check will tell)
            return None
        return sum(1 for _, msg in events if isinstance(msg, dict) and msg.get("action") == "remove-worker")

    def progress(self) -> None:
        self.base = None  # counted again from the next check

    def check(self) -> None:
        now = time.monotonic()
        if now - self.at < CHECK_SECONDS:
            return
        self.at = now
        n = self._count()
        if n is None:
            return
        if self.base is None:
            self.base = n
            return
        limit = max(6, MAX_RESTARTS * self.n_workers)
        if n - self.base >= limit:
            raise ExecutorError(f"dask: {n - self.base} workers died (each restarted by its nanny) in "
                                f"{now - self.t0:.0f} s without finishing a chunk; giving up. A worker that dies as "
                                "it starts cannot import tabsim or JAX, or has too little memory: see the workers' "
                                "logs")


__all__ = ["probe_scheduler", "within", "LostWorkers", "PROBE_SECONDS", "SCHEDULER_SECONDS", "MAX_RESTARTS"]
