"""The process lifecycle: one process per (table, action, instant), attempts, leases, recovery.

Engine-agnostic: a ``Submitter`` runs the job (SparkSubmitHook under Airflow, a plain subprocess for
the CLI). The operator and the CLI both drive :class:`ProcessRunner`, so a run is recorded the same
way whichever started it.

The package, by concern: :mod:`.model` (RunRequest, RunOutcome, Submitter, the timing defaults),
:mod:`.runner` (the state machine), :mod:`.attempt` (an attempt's steps: lease, set-up, claim,
submit, watch, record) and :mod:`.attempt_state` (what an attempt owns), :mod:`.takeover`
(orphans, kill by id, wait for a peer), :mod:`.beat` and :mod:`.watchdog` (the running worker's
guards), :mod:`.results` (the result journal), :mod:`.summary`, :mod:`.errors`. This face re-exports
what importers use.
"""

from __future__ import annotations

from airflow_tablemgmt.lifecycle.errors import ProcessCanceled, StoreUnreachable, WorkerSuperseded
from airflow_tablemgmt.lifecycle.model import (
    HEARTBEAT_EVERY,
    LEASE_TTL,
    STALE_AFTER,
    ConfirmsLease,
    ConfirmsStop,
    KillsById,
    ObservesApplications,
    RunOutcome,
    RunRequest,
    Submitter,
    TakesJobConf,
    UsesStore,
    utcnow,
)
from airflow_tablemgmt.lifecycle.runner import ProcessRunner

__all__ = [
    "HEARTBEAT_EVERY",
    "LEASE_TTL",
    "STALE_AFTER",
    "ConfirmsLease",
    "ConfirmsStop",
    "KillsById",
    "ObservesApplications",
    "ProcessCanceled",
    "ProcessRunner",
    "RunOutcome",
    "RunRequest",
    "StoreUnreachable",
    "Submitter",
    "TakesJobConf",
    "UsesStore",
    "WorkerSuperseded",
    "utcnow",
]
