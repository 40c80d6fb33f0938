"""The ProcessFactory protocol (after Amoro's) and the JobSpec it hands to an engine."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from airflow_tablemgmt.core.process import Process

if TYPE_CHECKING:  # annotations only: the Spark job's driver imports JobSpec without pydantic's models
    from airflow_tablemgmt.core.formats import TableFormat
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


@dataclass(frozen=True)
class TriggerContext:
    """What the scheduler knows when it asks a factory for work."""

    instant: datetime
    catalog: CatalogSpec
    last_snapshot_id: int | None = None
    current_snapshot_id: int | None = None
    last_success: Process | None = None  # the newest SUCCESS process of this (table, action)


@runtime_checkable
class ProcessFactory(Protocol):
    """Decides which actions a format supports, how they are scheduled, and what job to run."""

    name: str

    def supported_actions(self) -> dict[TableFormat, set[str]]: ...

    def trigger_strategy(self, format: TableFormat, action: str) -> TriggerStrategy: ...

    def trigger(self, table: TableSpec, action: str, context: TriggerContext) -> JobSpec | None:
        """The job to run now, or None when there is nothing to do."""
        ...

    def recover(self, table: TableSpec, process: Process, context: TriggerContext) -> JobSpec:
        """The job that finishes an interrupted process; raise RecoverProcessFailed to abandon it."""
        ...
