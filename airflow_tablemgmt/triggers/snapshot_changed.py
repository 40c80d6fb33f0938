"""The sensor's deferrable trigger: fire once when a table's current snapshot is not the one given."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Final

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_tablemgmt.core.errors import CatalogUnavailable, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.hooks.secrets import SecretResolutionError
from airflow_tablemgmt.triggers.readers import catalog_json, check_table_in_catalog, resolved_reader

# Airflow's trigger table stores this path with every deferred sensor; it stays the path the trigger
# was first published under (``triggers/snapshot.py`` re-exports the class), so rows written by an
# older release and by this one load the same way.
CHANGED_TRIGGER_CLASSPATH: Final = "airflow_tablemgmt.triggers.snapshot.TableSnapshotChangedTrigger"


class TableSnapshotChangedTrigger(BaseTrigger):
    """Fire once, when the current snapshot of ``table_id`` is not ``since_snapshot_id``.

    ``since_snapshot_id=None`` means "any snapshot". ``timeout`` (seconds) becomes an absolute
    ``deadline`` (epoch seconds) when the trigger is first built, and that deadline is what is
    serialized, so moving the trigger to another triggerer does not restart the clock.

    Event payloads (``status`` first):
    ``{"status": "changed", "table", "snapshot_id", "previous_snapshot_id"}``,
    ``{"status": "timeout", "table", "snapshot_id", "previous_snapshot_id", "message"}``,
    ``{"status": "error", "table", "message"}`` (the table does not exist).
    """

    def __init__(
        self,
        *,
        table_id: str,
        catalog: dict[str, Any] | CatalogSpec,
        since_snapshot_id: int | None = None,
        poll_interval: float = 5.0,
        timeout: float | None = None,
        deadline: float | None = None,
    ) -> None:
        super().__init__()
        self.catalog = catalog_json(catalog)
        self.table_id = str(check_table_in_catalog(table_id, self.catalog))
        if poll_interval <= 0:
            raise ValueError(f"poll_interval: must be > 0 seconds, got {poll_interval!r}")
        self.since_snapshot_id = since_snapshot_id
        self.poll_interval = float(poll_interval)
        self.timeout = timeout
        if deadline is None and timeout is not None:
            deadline = time.time() + timeout
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CHANGED_TRIGGER_CLASSPATH,
            {
                "table_id": self.table_id,
                "catalog": self.catalog,
                "since_snapshot_id": self.since_snapshot_id,
                "poll_interval": self.poll_interval,
                "timeout": self.timeout,
                "deadline": self.deadline,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        table = TableIdentifier.parse(self.table_id)
        try:
            reader = await asyncio.to_thread(resolved_reader, self.catalog)
        except SecretResolutionError as e:
            yield TriggerEvent({"status": "error", "table": self.table_id, "message": str(e)})
            return
        problem: str | None = None
        while True:
            try:
                changed, current = await asyncio.to_thread(
                    reader.has_new_snapshot, table, self.since_snapshot_id
                )
            except TableNotFound as e:
                yield TriggerEvent({"status": "error", "table": self.table_id, "message": str(e)})
                return
            except (CatalogUnavailable, OSError) as e:
                # An outage is waited out (said once per distinct failure), within the sensor's deadline.
                if str(e) != problem:
                    problem = str(e)
                    self.log.warning("snapshot check of %s failed, will retry: %s", self.table_id, e)
                if self.deadline is not None and self.deadline - time.time() <= 0:
                    yield TriggerEvent(
                        {
                            "status": "timeout",
                            "table": self.table_id,
                            "snapshot_id": None,
                            "previous_snapshot_id": self.since_snapshot_id,
                            "message": f"the catalog did not answer within {self.timeout} seconds: {e}",
                        }
                    )
                    return
                await asyncio.sleep(self.poll_interval)
                continue
            problem = None
            if changed:
                yield TriggerEvent(
                    {
                        "status": "changed",
                        "table": self.table_id,
                        "snapshot_id": current,
                        "previous_snapshot_id": self.since_snapshot_id,
                    }
                )
                return
            remaining = None if self.deadline is None else self.deadline - time.time()
            if remaining is not None and remaining <= 0:
                yield TriggerEvent(
                    {
                        "status": "timeout",
                        "table": self.table_id,
                        "snapshot_id": current,
                        "previous_snapshot_id": self.since_snapshot_id,
                        "message": (
                            f"no snapshot of {self.table_id} other than {self.since_snapshot_id} "
                            f"within {self.timeout} seconds"
                        ),
                    }
                )
                return
            await asyncio.sleep(
                self.poll_interval if remaining is None else min(self.poll_interval, remaining)
            )
