"""Wait until an Iceberg table has a snapshot other than the one a task last saw."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowSensorTimeout

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader
from airflow_tablemgmt.triggers.readers import catalog_json, check_table_in_catalog, resolved_reader
from airflow_tablemgmt.triggers.snapshot_changed import TableSnapshotChangedTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context


def as_snapshot_id(value: Any, field: str = "since_snapshot_id") -> int | None:
    """A snapshot id from a Python value or a rendered template (``"123"``, ``"None"``, ``""``)."""
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "None", "null"):
            return None
        try:
            return int(text)
        except ValueError:
            pass
    raise InvalidDeclaration(f"{field}: expected a snapshot id (an integer) or None, got {value!r}")


class TableSnapshotSensor(BaseSensorOperator):
    """Succeed when ``table`` (``catalog.namespace.table``) has a current snapshot other than
    ``since_snapshot_id`` (None: any snapshot). The new snapshot id is the task's XCom.

    Deferrable by default: one cheap check on the worker, then the wait moves to the triggerer
    (:class:`~airflow_tablemgmt.triggers.snapshot.TableSnapshotChangedTrigger`). With
    ``deferrable=False`` it pokes every ``poll_interval`` seconds (``mode="reschedule"`` works too).
    ``timeout`` and ``soft_fail`` behave as for every sensor. A table that does not exist fails the task.
    ``catalog`` keeps its secrets as references (``conn:``/``var:``/``env:``): they are resolved where the
    check runs (the worker, then the triggerer), never stored in the trigger's kwargs.
    """

    template_fields: Sequence[str] = ("table", "since_snapshot_id")
    ui_color = "#d5e8f7"

    def __init__(
        self,
        *,
        table: str,
        catalog: dict[str, Any] | CatalogSpec,
        since_snapshot_id: int | str | None = None,
        deferrable: bool = True,
        poll_interval: float = 5,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        self.table = table
        self.catalog = catalog_json(catalog)
        self.since_snapshot_id = since_snapshot_id
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self._reader: SnapshotReader | None = None

    @property
    def table_identifier(self) -> TableIdentifier:
        return check_table_in_catalog(self.table, self.catalog)

    def _snapshot_reader(self) -> SnapshotReader:
        # Resolved here, on the worker; ``self.catalog`` (and the trigger it defers to) keep references.
        if self._reader is None:
            self._reader = resolved_reader(self.catalog)
        return self._reader

    def poke(self, context: Context) -> PokeReturnValue:
        since = as_snapshot_id(self.since_snapshot_id)
        changed, current = self._snapshot_reader().has_new_snapshot(self.table_identifier, since)
        self.log.info("%s: current snapshot %s, waiting for one other than %s", self.table, current, since)
        return PokeReturnValue(is_done=changed, xcom_value=current if changed else None)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        done = self.poke(context)
        if done:
            return done.xcom_value
        self.defer(
            trigger=TableSnapshotChangedTrigger(
                table_id=str(self.table_identifier),
                catalog=self.catalog,
                since_snapshot_id=as_snapshot_id(self.since_snapshot_id),
                poll_interval=self.poke_interval,
                timeout=self.timeout,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> int:
        status = event.get("status")
        if status == "changed":
            self.log.info("%s: new snapshot %s", event["table"], event["snapshot_id"])
            return int(event["snapshot_id"])
        if status == "timeout":
            raise AirflowSensorTimeout(event.get("message", f"no new snapshot of {self.table}"))
        if status == "error":
            raise TableNotFound(event.get("message", f"table {self.table} not found"))
        raise ValueError(f"unexpected event from TableSnapshotChangedTrigger: {event!r}")
