"""The task side of a Spark Connect server's slot limit: wait for a free slot, keep its lease alive while
the job runs, give it back (``store/connect_slots.py`` holds the slots).

A task holds one slot of the server for its whole job, so at most ``slots`` jobs run on the server at
once; the slot tells the task which server-side session to attach to, and whether that session already
carries the task's catalog settings (the same :func:`settings_hash`), in which case the task skips the
session's set-up and its catalog is already loaded on the server. No free slot within ``wait`` seconds
is :class:`ConnectBusy`, a failure naming the server and its limit that Airflow's retry tries again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_tablemgmt.spark.connect.errors import ConnectBusy

if TYPE_CHECKING:
    from airflow_tablemgmt.store.connect_slots import ConnectSlot, ConnectSlotRepository

log = logging.getLogger(__name__)

#: A slot's lease; renewed every third of it while the job runs, so a dead worker's slot frees within it.
SLOT_TTL = timedelta(seconds=60)
DEFAULT_SLOTS = 8
DEFAULT_WAIT = 120.0
POLL_EVERY = 0.5


def settings_hash(conf: dict[str, str]) -> str:
    """The hash of a session's catalog settings (keys and values, secrets included: a rotated secret is
    other settings). Only its digest is stored, never the settings."""
    return hashlib.sha256(json.dumps(sorted(conf.items())).encode()).hexdigest()


@dataclass
class SlotLease:
    """A held slot; :meth:`release` gives it back (the session kept for reuse only after a clean job)."""

    repo: ConnectSlotRepository
    slot: ConnectSlot
    ttl: timedelta = SLOT_TTL
    lost: threading.Event = field(default_factory=threading.Event)
    _done: threading.Event = field(default_factory=threading.Event)

    def start_renewing(self) -> None:
        threading.Thread(target=self._renew, name="tablemgmt-connect-slot", daemon=True).start()

    def _renew(self) -> None:
        every = self.ttl.total_seconds() / 3
        while not self._done.wait(every):
            try:
                if not self.repo.renew(self.slot.server, self.slot.slot, self.slot.holder, self.ttl):
                    log.warning(
                        "tablemgmt: lost the lease of slot %d of %s", self.slot.slot, self.slot.server
                    )
                    self.lost.set()
                    return
            except Exception:  # noqa: BLE001 - a store hiccup: the next renewal tries again
                log.warning("tablemgmt: renewing the Connect slot's lease failed", exc_info=True)

    def release(self, *, keep_session: bool) -> None:
        self._done.set()
        try:
            self.repo.release(
                self.slot.server,
                self.slot.slot,
                self.slot.holder,
                keep_session=keep_session and not self.lost.is_set(),
            )
        except Exception:  # noqa: BLE001 - the lease expires on its own
            log.warning(
                "tablemgmt: releasing slot %d of %s failed", self.slot.slot, self.slot.server, exc_info=True
            )


@dataclass
class SlotPool:
    """The slots of one server as tasks see them."""

    repo: ConnectSlotRepository
    server: str
    slots: int = DEFAULT_SLOTS
    wait: float = DEFAULT_WAIT
    ttl: timedelta = SLOT_TTL
    poll: float = POLL_EVERY

    def lease(self, conf_hash: str, holder: str, stop: threading.Event | None = None) -> SlotLease:
        """A slot for ``holder``, waiting up to :attr:`wait` seconds; :class:`ConnectBusy` when none frees
        (or ``stop`` is set: a cancel or kill while waiting)."""
        deadline = time.monotonic() + self.wait
        waited = False
        while True:
            slot = self.repo.acquire(self.server, self.slots, conf_hash, holder, self.ttl)
            if slot is not None:
                if waited:
                    log.info("tablemgmt: got slot %d of %s", slot.slot, self.server)
                lease = SlotLease(self.repo, slot, self.ttl)
                lease.start_renewing()
                return lease
            if not waited:
                log.info(
                    "tablemgmt: all %d slots of %s are held; waiting up to %.0fs",
                    self.slots,
                    self.server,
                    self.wait,
                )
                waited = True
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.wait(min(self.poll, left))):
                break
            if stop is None:
                time.sleep(min(self.poll, left))
        why = (
            "stopped while waiting"
            if stop is not None and stop.is_set()
            else f"after waiting {self.wait:.0f}s"
        )
        raise ConnectBusy(
            f"Spark Connect server {self.server} is busy: all {self.slots} of its slots (the slots extra of its "
            f"spark_connect connection) are held by other tasks, {why}; the task's retry tries again"
        )
