"""What goes into a run and what comes out: :class:`RunRequest`, :class:`RunOutcome`, the
:class:`Submitter` that runs the job, and the timing defaults."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from airflow_tablemgmt.core.factory import JobSpec, TableOutcome
from airflow_tablemgmt.core.process import Process

# The timing defaults (how they relate: core/timing.py), re-exported for the lifecycle's importers.
from airflow_tablemgmt.core.timing import HEARTBEAT_EVERY as HEARTBEAT_EVERY
from airflow_tablemgmt.core.timing import LEASE_TTL as LEASE_TTL
from airflow_tablemgmt.core.timing import STALE_AFTER as STALE_AFTER

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.spark.protocol import JobResult
    from airflow_tablemgmt.store import Store


@runtime_checkable
class Submitter(Protocol):
    """Runs a job (SparkSubmitHook under Airflow, a plain subprocess for the CLI, a stand-in in tests)."""

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult: ...

    def kill(self) -> None: ...


@runtime_checkable
class KillsById(Submitter, Protocol):
    """A submitter that can also kill an earlier attempt's application by its id (see SparkJobHook)."""

    def kill_application(self, application_id: str) -> bool:
        """Kill ``application_id``; True only when the engine acknowledged it."""
        ...


@runtime_checkable
class NamesConnectServer(KillsById, Protocol):
    """A Spark Connect submitter: it kills by id, and names its server (``sc://host:port``), where a lost
    attempt's job is interrupted (``takeover.end_lost_connect_job``)."""

    @property
    def url(self) -> str: ...


@runtime_checkable
class ObservesApplications(Protocol):
    """A submitter that can ask the engine whether an application has ended. A takeover releases a
    lost attempt's lease after a kill only once this reports the application ended: an acknowledged
    kill is not a dead driver (a driver may take seconds to die). Without it the lease lapses."""

    def application_finished(self, application_id: str) -> bool:
        """True only when the engine reports ``application_id`` ended (finished, killed, failed)."""
        ...


@runtime_checkable
class ConfirmsStop(Protocol):
    """A submitter that can say whether the job it was told to kill is really gone (the driver's
    processes, or the application as its master reports it). The runner keeps the table's lease,
    to lapse on its own, when this answers False."""

    def job_stopped(self) -> bool: ...


@runtime_checkable
class ConfirmsLease(Protocol):
    """A submitter whose job can hold its own deadline on the table's lease (a dead man's switch, see
    ``spark/job/lease_guard.py``): the heartbeat confirms every successful renewal to it, and the job
    stops itself when the confirmation runs out, even while this worker is frozen."""

    def confirm_lease(self, sent_monotonic: float, valid_for: float) -> None:
        """The lease renewed by a call sent at ``sent_monotonic`` holds for ``valid_for`` seconds from
        then (the watchdog's deadline). Called before submit (the first) and after each renewal."""
        ...


@runtime_checkable
class UsesStore(Protocol):
    """A submitter that needs the metadata store before it submits (a Spark Connect job leases a server
    slot there, ``hooks/spark_connect.py``)."""

    def use_store(self, store: Store) -> None: ...


@runtime_checkable
class TakesJobConf(Protocol):
    """A submitter whose jobs take extra Spark conf from the caller (the parent run's lineage keys,
    ``lineage/spark.py``), merged under each job's own."""

    extra_conf: dict[str, str]


@dataclass(frozen=True)
class RunRequest:
    table_id: str
    action: str
    instant: datetime
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    try_number: int | None = None
    holder: str = "cli"
    # Recorded on a new process row (a refresh's trigger, schedule time, partitions, options); a row
    # that already exists keeps its own.
    parameters: dict[str, Any] | None = None
    # Whether a failure of this run is final (no Airflow retry follows): only then does it count
    # towards a dynamic table's suspend-after-failures.
    last_try: bool = True


@dataclass
class RunOutcome:
    process: Process
    summary: dict[str, Any]
    reused: bool = False  # True when an earlier success for the same instant was returned
    # What a store-aware factory recorded on the table for this outcome (None for plain factories).
    table_state: TableOutcome | None = None


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Stop:
    """Why the heartbeat thread stopped the job (set once, read after submit returns)."""

    kind: str  # "canceled" | "superseded"
    reason: str


class RunSettings(Protocol):
    """What an attempt, the takeover and the predecessor's check read of the
    :class:`~.runner.ProcessRunner` that drives them: its public settings, fixed for its life. Declared
    here so those modules depend on this contract, not on the runner's module (which imports them)."""

    store: Store
    submitter: Submitter
    lease_ttl: timedelta
    heartbeat_every: timedelta
    stale_after: timedelta
    wait_for_peer: timedelta
    resolve_catalog: Callable[[CatalogSpec], CatalogSpec] | None
