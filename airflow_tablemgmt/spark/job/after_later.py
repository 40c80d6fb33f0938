"""The figures after an action, read once the job has handed its session on (issue 40: a planned batch's
throughput on Spark Connect).

A batch runs its tables' jobs one after another on one kept Connect session (``spark/connect/kept.py``), and
the next job starts the moment the previous one returns. Reading a compacted table's figures after its
procedure (its new metadata file, manifest list and manifests, with pyiceberg, in the worker's process) took
6-7 ms of every small table's ≈ 0.17 s between two procedures: the server idle meanwhile. Those figures are
a record of what the job left; nothing in the job decides on them. So for an action that changes no row
(a file or manifest rewrite) on such a session, :func:`~airflow_tablemgmt.spark.job.metrics.metrics_after`
returns a placeholder and records here what to read; the job's caller (``spark/connect/session.py``) fills
the placeholder in the table's own thread, beside the next table's job, before the lifecycle records the
result (``services/batch_overlap.py``'s ``finished``). The table's lease is still held then, so no other job
of ours has committed to it.

Only without Spark: the read is the job's early read's (its table's metadata files, read with the settings
the session's catalog agreed with), and the live record count is the one before the action (an action that
changes no row leaves it). A read that fails leaves every figure ``None`` and says why in the log and in
``after_unmeasured``, rather than touching a session another table's job is using.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.spark.job.early_read import EarlyRead

log = logging.getLogger(__name__)

#: The key of a placeholder's one entry (its token), in the job's summary until it is read.
LATER_KEY = "_read_after_the_job"
#: Where a session keeps the reads left for its caller (set only while :func:`reads_left_to_caller` runs).
_ATTR = "_tablemgmt_after_later"
_tokens = itertools.count(1)


@dataclass(frozen=True)
class LaterRead:
    """One action's figures after it, to be read from the table's files once the job has returned."""

    token: int
    table: TableIdentifier
    before: dict[str, Any]
    early: EarlyRead

    def read(self) -> dict[str, Any]:
        """The figures (``metrics.METRIC_KEYS``) at the table's current metadata file."""
        from airflow_tablemgmt.metadata.files import read_shape
        from airflow_tablemgmt.spark.conf import io_settings

        early = self.early
        location = early.current_location()
        if location is None:
            raise RuntimeError(f"the current metadata file of {self.table} could not be read without Spark")
        shape = (
            early.shape
            if location == early.location
            else read_shape(location, io_settings(early.settings, self.table.catalog))
        )
        live = shape.physical_rows if shape.delete_files == 0 else int(self.before["live_records"])
        return shape.metrics(live)


@contextmanager
def reads_left_to_caller(spark: Any) -> Iterator[list[LaterRead]]:
    """While the job runs on ``spark``, the figures after a row-preserving action are left to the caller:
    the list it yields holds them when the job returns (fill the result with :func:`fill`)."""
    pending: list[LaterRead] = []
    setattr(spark, _ATTR, pending)
    try:
        yield pending
    finally:
        setattr(spark, _ATTR, None)


def leave_to_caller(
    spark: Any, table: TableIdentifier, before: dict[str, Any], early: EarlyRead
) -> dict[str, Any] | None:
    """A placeholder for the figures after the action when ``spark``'s caller reads them
    (:func:`reads_left_to_caller`); None when it does not (the job reads them now)."""
    pending = getattr(spark, _ATTR, None)
    if pending is None:
        return None
    token = next(_tokens)
    pending.append(LaterRead(token, table, before, early))
    log.info("the figures of %s after the action are read after the job, beside the next one", table)
    return {LATER_KEY: token}


def fill(summary: dict[str, Any], pending: list[LaterRead], keys: Iterable[str]) -> float:
    """Replace each placeholder in ``summary`` (its top-level values) with the figures read now; the
    seconds spent. Never raises: a read that fails leaves each of the figures' ``keys`` ``None`` and says
    why."""
    started = time.perf_counter()
    by_token = {p.token: p for p in pending}
    for key, value in list(summary.items()):
        if not (isinstance(value, dict) and set(value) == {LATER_KEY}):
            continue
        later = by_token.get(value[LATER_KEY])
        try:
            if later is None:
                raise RuntimeError("no read was left for it")
            summary[key] = later.read()
        except Exception as e:  # noqa: BLE001 - a figure never fails a table
            table = later.table if later is not None else "the table"
            log.warning("the figures of %s after the action could not be read: %s", table, str(e)[:300])
            summary[key] = dict.fromkeys(keys)
            summary[f"{key}_unmeasured"] = str(e)[:300]
    return time.perf_counter() - started


__all__ = ["LATER_KEY", "LaterRead", "fill", "leave_to_caller", "reads_left_to_caller"]
