"""What one run cost: executor core-seconds, CPU seconds and the bytes it read and wrote (issue 39).

The figures come from Spark's own task metrics (``spark/cost.py`` sums them: the application's stages
under spark-submit, the job's tagged operations on Spark Connect). They travel in the job's result as
``summary["cost"]`` (a failed run's result line carries ``"cost"`` beside its error), are stored on the
process (``tms_process``'s four cost columns, migration 0011) and are summed per table, policy and day
(``store/process_cost.py``).

* ``core_seconds``: the executors' task run time summed over every task (Spark's ``executorRunTime``):
  each running task holds one executor core for that long, so this is the core-time the run occupied,
  which is what a cluster is paid for, whether the task computed or waited on storage.
* ``cpu_seconds``: the CPU time of the same tasks (``executorCpuTime``): the compute part of it. Its
  ratio to ``core_seconds`` says how much of a run was waiting on I/O.
* ``bytes_read``: the bytes tasks read from storage (``inputBytes``: the scans of the table's files).
* ``bytes_written``: the bytes tasks wrote to storage (``outputBytes``: the new data files). Measured on a
  binpack rewrite of 24 small files into 2 (Spark 3.5.9, Iceberg 1.10): exactly the 2 new files' sizes.
  Shuffle bytes (a sort rewrite's exchange, on the executors' local disks) are not storage writes; the
  summary's ``cost`` keeps them apart (``shuffle_read_bytes``, ``shuffle_write_bytes``).

None of a process's four columns is set when nothing measured the run (no Spark job: a skip, a run
declined; a process recorded before migration 0011; a Connect server without its status API).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The process columns, in the order the CLI and REST show them.
COST_COLUMNS = ("core_seconds", "cpu_seconds", "bytes_read", "bytes_written")
#: The detail a run's ``summary["cost"]`` may carry besides the columns.
COST_DETAIL = (
    "shuffle_read_bytes",
    "shuffle_write_bytes",
    "tasks",
    "failed_tasks",
    "stages",
    "jobs",
    "scope",
    "source",
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 else None


@dataclass(frozen=True)
class RunCost:
    """One run's cost, as stored on its process. Seconds are rounded to the millisecond."""

    core_seconds: float
    cpu_seconds: float
    bytes_read: int
    bytes_written: int

    def columns(self) -> dict[str, float | int]:
        return {name: getattr(self, name) for name in COST_COLUMNS}

    @classmethod
    def parse(cls, figures: Any) -> RunCost | None:
        """The cost in a result's ``cost`` document; None when it is absent or not a cost (a value that
        is not a non-negative number makes the whole document unreadable, never a half-measured run)."""
        if not isinstance(figures, Mapping):
            return None
        values = [_number(figures.get(name)) for name in COST_COLUMNS]
        if any(v is None for v in values):
            return None
        core, cpu, read, written = (v or 0.0 for v in values)
        return cls(round(core, 3), round(cpu, 3), int(read), int(written))


def cost_of(summary: Mapping[str, Any] | None) -> RunCost | None:
    """The cost a run's summary (or a failed run's result document) carries under ``cost``."""
    if not isinstance(summary, Mapping):
        return None
    return RunCost.parse(summary.get("cost"))


def cost_columns(summary: Mapping[str, Any] | None) -> dict[str, float | int]:
    """The process columns to write for ``summary``: empty when it carries no cost."""
    cost = cost_of(summary)
    return cost.columns() if cost is not None else {}
