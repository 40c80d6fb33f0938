"""The ProcessFactory protocol (after Amoro's), the JobSpec it hands to an engine, the declared
contract of a factory that reads the store (:class:`StoreAwareFactory`), and what a format needs of
Spark (``core.formats.FormatSession``, re-exported here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from airflow_tablemgmt.core.formats import FormatSession
from airflow_tablemgmt.core.process import Process

if TYPE_CHECKING:  # annotations only: the Spark job's driver imports JobSpec without pydantic's models
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.core.triggers import TriggerStrategy


@dataclass(frozen=True)
class JobSpec:
    """What a Spark job needs: the table, its catalog, the action and its options. JSON on the wire."""

    table: dict[str, str]  # {"catalog", "namespace", "name"}
    catalog: dict[str, Any]  # CatalogSpec as JSON
    action: str
    options: dict[str, Any] = field(default_factory=dict)
    process_id: int | None = None
    attempt: int = 1

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def build(cls, table: TableSpec, catalog: CatalogSpec, action: str, options: dict[str, Any]) -> JobSpec:
        return cls(
            table={"catalog": table.catalog, "namespace": table.namespace, "name": table.name},
            catalog=catalog.model_dump(mode="json", by_alias=True),
            action=action,
            options=options,
        )


def declined(reason: str) -> dict[str, Any]:
    """The summary of a run a factory declines before any job starts: a skipped process whose reason
    says what was found and what to change (``{"skipped": true, "declined": true, "reason": ...}``)."""
    return {"skipped": True, "declined": True, "reason": reason}


@dataclass(frozen=True)
class TriggerContext:
    """What the scheduler knows when it asks a factory for work."""

    instant: datetime
    catalog: CatalogSpec
    last_snapshot_id: int | None = None
    current_snapshot_id: int | None = None
    last_success: Process | None = None  # the newest SUCCESS process of this (table, action)
    # Resolves a catalog's secret references (handed in by whoever builds the ProcessRunner: the
    # operator and the services pass ``hooks.secrets.resolve_catalog_spec``); None: use as stored.
    resolve_catalog: Callable[[CatalogSpec], CatalogSpec] | None = None
    # For expire-snapshots: per dynamic table that reads this table incrementally, the snapshot of it that
    # its next refresh reads the change from (``lifecycle/retention.py``). Expiring it would turn that
    # refresh into a FULL one, so the expiry keeps it and what came after.
    retain_snapshots: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunPlan:
    """What a store-aware factory makes of one run before its process opens: the parameters to record
    on a new process row, or why this run has nothing to do (the task ends skipped)."""

    parameters: dict[str, Any] | None = None
    skip_reason: str | None = None


@dataclass(frozen=True)
class TableOutcome:
    """What a store-aware factory reports about its table once a process ended (``on_finished``)."""

    state: str | None = None  # the table's state after the outcome was recorded (e.g. ACTIVE)
    # Set when the table no longer takes scheduled work because of this outcome (a dynamic table
    # suspended after its failures): one phrase naming the table and why, e.g.
    # "lake.s.t is now suspended: 5 consecutive failed refreshes".
    halted: str | None = None


@runtime_checkable
class ProcessFactory(Protocol):
    """Decides which actions a format supports, how they are scheduled, and what job to run."""

    name: str

    def supported_actions(self) -> dict[str, set[str]]: ...

    def trigger_strategy(self, format: str, action: str) -> TriggerStrategy: ...

    def trigger(
        self, table: TableSpec, action: str, context: TriggerContext
    ) -> JobSpec | dict[str, Any] | None:
        """The job to run now, None when there is nothing to do, or (no job either) the summary of a
        declined run naming why (:func:`declined`: a property of the table forbids the action, the
        table is not there or not of its declared format), recorded as a skipped process."""
        ...

    def recover(self, table: TableSpec, process: Process, context: TriggerContext) -> JobSpec:
        """The job that finishes an interrupted process; raise RecoverProcessFailed to abandon it."""
        ...


#: The metadata store a store-aware factory reads (``airflow_tablemgmt.store.Store``, which core, a lower
#: layer, never imports): the protocol is generic in it, and the lifecycle uses ``StoreAwareFactory[Store]``.
StoreT = TypeVar("StoreT", contravariant=True)


@runtime_checkable
class StoreAwareFactory(ProcessFactory, Protocol[StoreT]):
    """A factory whose work depends on what the store holds (dynamic tables: the definition, the
    refresh request, the table's state). The lifecycle checks for it with ``isinstance`` and then
    calls these instead of :meth:`ProcessFactory.trigger` / :meth:`ProcessFactory.recover`."""

    def run_parameters(
        self,
        store: StoreT,
        table: TableSpec,
        action: str,
        *,
        conf: dict[str, Any] | None,
        run_type: str | None,
        instant: datetime,
    ) -> RunPlan:
        """The parameters of the process a scheduled task opens (from its DAG run's conf and kind),
        or a skip reason."""
        ...

    def trigger_process(
        self, store: StoreT, table: TableSpec, process: Process, context: TriggerContext
    ) -> JobSpec | dict[str, Any] | None:
        """The job for ``process``; a dict is the summary of a process that needs no job, None:
        nothing to do. Used for first and recovering attempts alike."""
        ...

    def complete_summary(
        self,
        process: Process,
        summary: dict[str, Any],
        *,
        application_id: str | None = None,
        duration_seconds: float | None = None,
    ) -> dict[str, Any]:
        """The summary recorded on the process row (and returned as the task's XCom)."""
        ...

    def on_finished(
        self, store: StoreT, process: Process, summary: dict[str, Any] | None, error: str | None
    ) -> TableOutcome | None:
        """Record how the process ended on the table (``error`` None: it succeeded)."""
        ...


__all__ = [
    "FormatSession",
    "JobSpec",
    "ProcessFactory",
    "RunPlan",
    "StoreAwareFactory",
    "TableOutcome",
    "TriggerContext",
    "declined",
]
