"""The lifecycle's timing settings and the rules that keep one job per table.

A live worker beats every ``heartbeat_every``: it stamps its process row and renews the table's lease
for ``lease_ttl``. A row whose last beat is older than ``stale_after`` belongs to a lost worker, and
another may take its process over once the lease has lapsed. Those three only work together:

* ``lease_ttl >= 3 x heartbeat_every``: the lease must survive a late or failed beat; with less, it
  lapses between two beats of a live worker and a second worker's job overlaps the first.
* ``stale_after >= 2 x heartbeat_every``: with less, one late beat makes a live worker's row look
  lost, the reaper closes it and its job is run again.
* ``stale_after < lease_ttl``: a lost row is noticed before its lease lapses, so a takeover that waits
  for the lease never starts while the lost worker could still be running.

:func:`check_timing` enforces them wherever the settings are made (the operator, the CLI, the
``ProcessRunner``); the message names both values and the rule. :func:`stale_bound` is how long a
row may go without a beat before it counts as lost: the reaper's ``stale_after``, but never less than
:data:`STALE_BEATS` beats at the interval the row's own worker promised (recorded on the row).
"""

from __future__ import annotations

from datetime import timedelta

from airflow_tablemgmt.core.errors import UnsafeTiming

#: Defaults, and how they relate: a live worker beats every ``HEARTBEAT_EVERY`` and renews its
#: lease with it; a row whose heartbeat is older than ``STALE_AFTER`` belongs to a lost worker;
#: the lease lapses ``LEASE_TTL`` after the last renewal, later than the row goes stale, so a
#: takeover that waits for the lease never starts while the lost worker could still be running.
#: (Here rather than in the lifecycle, which re-exports them: the operator's defaults are read when a
#: task start parses its DAG, which should not import the lifecycle.)
HEARTBEAT_EVERY = timedelta(seconds=20)
STALE_AFTER = timedelta(seconds=90)
LEASE_TTL = timedelta(minutes=2)
#: lease_ttl must hold at least this many heartbeats.
LEASE_BEATS = 3
#: A row counts as lost after this many missed beats at least (and never before stale_after).
STALE_BEATS = 2


def _s(d: timedelta) -> str:
    return f"{d.total_seconds():g}s"


def check_timing(
    *, lease_ttl: timedelta, heartbeat_every: timedelta, stale_after: timedelta, where: str = "settings"
) -> None:
    """Raise :class:`UnsafeTiming` naming the values and the rule they break (see the module doc)."""
    for name, value in (
        ("lease_ttl", lease_ttl),
        ("heartbeat_every", heartbeat_every),
        ("stale_after", stale_after),
    ):
        if not isinstance(value, timedelta) or value <= timedelta(0):
            raise UnsafeTiming(f"{where}: {name} must be a positive duration, got {value!r}")
    if lease_ttl < LEASE_BEATS * heartbeat_every:
        raise UnsafeTiming(
            f"{where}: lease_ttl {_s(lease_ttl)} is too close to heartbeat_every {_s(heartbeat_every)}: "
            f"the rule is lease_ttl >= {LEASE_BEATS} x heartbeat_every (here at least "
            f"{_s(LEASE_BEATS * heartbeat_every)}), so one late heartbeat cannot let the lease lapse "
            "under a running job"
        )
    if stale_after < STALE_BEATS * heartbeat_every:
        raise UnsafeTiming(
            f"{where}: stale_after {_s(stale_after)} is too close to heartbeat_every "
            f"{_s(heartbeat_every)}: the rule is stale_after >= {STALE_BEATS} x heartbeat_every (here at "
            f"least {_s(STALE_BEATS * heartbeat_every)}), so one late heartbeat cannot get a live "
            "worker's process reaped and run again"
        )
    if stale_after >= lease_ttl:
        raise UnsafeTiming(
            f"{where}: stale_after {_s(stale_after)} must be below lease_ttl {_s(lease_ttl)}: the rule is "
            "stale_after < lease_ttl, so a lost worker's process is noticed before its lease lapses"
        )


def stale_bound(stale_after: timedelta, promised_heartbeat_s: float | None) -> timedelta:
    """How long a row may go without a beat before it is judged lost: ``stale_after``, raised to
    :data:`STALE_BEATS` beats of the interval the row's worker promised (when it recorded one)."""
    if promised_heartbeat_s is None or promised_heartbeat_s <= 0:
        return stale_after
    return max(stale_after, timedelta(seconds=STALE_BEATS * promised_heartbeat_s))


#: A PENDING row is reaped only after this long without a sign of life (the operator: or
#: 4 x ``lease_poll``, whichever is longer): a task waiting for a lease stamps its row only each time
#: it polls, and a deferred task's resume can lag behind its trigger by the scheduler's own latency.
PENDING_STALE_AFTER = timedelta(minutes=15)
