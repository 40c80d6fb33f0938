"""The worker's own deadline on its lease, independent of the store.

The heartbeat thread renews the table's lease through the store; if the store *hangs* (a route that
stops forwarding, a frozen server) that thread blocks inside the call and cannot notice that the lease
is about to lapse. :class:`LeaseWatchdog` runs beside it and never touches the store: it knows when
the last renewal that *succeeded* was sent (a monotonic clock, taken before the call, so it errs
early), and when ``deadline`` passes without a newer one it calls ``on_expire`` once: the lifecycle
kills its Spark job there, before another worker can take the lease.

``deadline`` is the lease TTL minus a margin (the lifecycle uses one heartbeat interval): the lease
lapses ``lease_ttl`` after the database executed the renewal, which is after the call was sent, so
the job is killed at least ``margin`` before anybody else may start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class LeaseWatchdog:
    def __init__(self, deadline_s: float, on_expire: Callable[[float], None], *, name: str = "lease") -> None:
        if deadline_s <= 0:
            raise ValueError(f"deadline_s: must be positive, got {deadline_s}")
        self.deadline_s = deadline_s
        self._on_expire = on_expire
        self._lock = threading.Lock()
        self._renewed_at = time.monotonic()
        self._stop = threading.Event()
        self.fired = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"tablemgmt-watchdog-{name}", daemon=True)

    def start(self, renewed_at: float | None = None) -> LeaseWatchdog:
        """Start watching; ``renewed_at`` is when the lease was last taken or renewed (monotonic),
        default now."""
        if renewed_at is not None:
            self._renewed_at = renewed_at
        self._thread.start()
        return self

    def renewed(self, sent_at: float) -> None:
        """A renewal sent at ``sent_at`` (monotonic, before the call) succeeded."""
        with self._lock:
            self._renewed_at = max(self._renewed_at, sent_at)

    def remaining(self) -> float:
        with self._lock:
            return self._renewed_at + self.deadline_s - time.monotonic()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        tick = min(0.5, max(0.01, self.deadline_s / 20))
        while not self._stop.wait(tick):
            left = self.remaining()
            if left <= 0:
                self.fired.set()
                silent = self.deadline_s - left
                try:
                    self._on_expire(silent)
                except Exception:  # noqa: BLE001 - the lease TTL stays the backstop
                    log.exception("tablemgmt: the lease watchdog's action failed")
                return
