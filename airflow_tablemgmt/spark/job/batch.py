"""The driver of a batch (ADR 0004 decision 3): ``spark/job/main.py --batch DIR`` runs the jobs of a planned
batch's tables one after another in ONE driver, one SparkSession, instead of one spark-submit per table.

The worker (``hooks/spark_batch.py``) hands the tables over one at a time, each in a *slot* directory of the
batch's directory, ``DIR/00000``, ``DIR/00001``, ...: it writes the slot's lease confirmation (``lease.json``,
``lease_guard.py``) and then its job spec (``job.json``, renamed into place whole) only once that table's
process is claimed and its lease taken, exactly as for a job of its own. The driver waits for the next slot's
spec (or ``DIR/end``: no more tables), and for each:

* starts the table's own **lease guard** on the slot's confirmation (a lapse SIGKILLs the driver JVM, as for
  one job: nothing of that table commits past its lease; the worker then runs the batch's next table in a new
  driver) and stops it when the table's job has ended, so a finished table's lease no longer bounds the next;
* runs the job as ``main.py --spec`` would (``_execute``: the fence before the commit step, the commit mark),
  on the session the first job started;
* prints the table's one result line, then goes on with the next slot.

A failure of one table's job is that table's result line; the driver goes on. The driver ends when the worker
writes ``end``, when it has waited :data:`IDLE_LIMIT_S` for a slot, or when its parent (the JVM spark-submit
started it from) is gone.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.spark.job import lease_guard
from airflow_tablemgmt.spark.job.redact import REDACT, redact, secret_values
from airflow_tablemgmt.spark.job.session import BackgroundSession
from airflow_tablemgmt.spark.protocol import Timings, describe_exception, failure_line, recording

if TYPE_CHECKING:
    from airflow_tablemgmt.core.factory import JobSpec

log = logging.getLogger("airflow_tablemgmt.spark.job")

#: The spec of a slot's table (written last, whole) and the file that says no table follows.
JOB_FILE = "job.json"
END_FILE = "end"
#: How often the driver looks for the next slot.
TICK_S = 0.02
#: The longest the driver waits for the next slot before it ends (the worker froze or went away).
IDLE_LIMIT_S = 1800.0


def slot_dir(root: Path, index: int) -> Path:
    """The directory of the batch's ``index``-th table."""
    return Path(root) / f"{index:05d}"


def next_spec(
    root: Path, index: int, *, tick: float = TICK_S, idle_limit: float = IDLE_LIMIT_S
) -> Path | None:
    """The ``index``-th slot's spec once the worker wrote it; None when the batch ended (``end``, the idle
    limit, or this driver's parent gone)."""
    spec = slot_dir(root, index) / JOB_FILE
    end = Path(root) / END_FILE
    parent = os.getppid()
    deadline = time.monotonic() + idle_limit
    while True:
        if spec.exists():
            return spec
        if end.exists() or os.getppid() != parent:
            return spec if spec.exists() else None
        if time.monotonic() > deadline:
            log.warning("no table for %.0fs: the batch driver ends", idle_limit)
            return None
        time.sleep(tick)


Execute = Callable[["JobSpec", Any, Timings, BackgroundSession], Any]


def run_batch_dir(root: Path, *, execute: Execute, load_spec: Callable[[Path], JobSpec]) -> int:
    """Run the batch in ``root`` (see the module docstring); ``execute`` and ``load_spec`` are
    ``main.py``'s. Returns 0 (each table's outcome is its own result line)."""
    background = BackgroundSession()
    spark: Any = None
    index = 0
    try:
        while True:
            spec = next_spec(root, index)
            if spec is None:
                break
            line = _one(spec, spark, background, execute, load_spec)
            if spark is None:
                spark = background.join()
            print(line, flush=True)
            index += 1
    finally:
        session = background.join()
        if session is not None:
            session.stop()
    log.info("batch driver: %d table(s)", index)
    return 0


def _one(
    spec: Path, spark: Any, background: BackgroundSession, execute: Execute, load: Callable[[Path], Any]
) -> str:
    """One table's job under its own lease guard; its result line (secrets redacted)."""
    guard = lease_guard.start_beside(spec)  # a confirmation already run out stops the driver here
    try:
        try:
            job = load(spec)
        except Exception as e:  # noqa: BLE001 - that table's failure, not the batch's
            error_class, message = describe_exception(e)
            return failure_line(None, None, error_class, message)
        REDACT.secrets = secret_values(job)
        timings = Timings()
        with recording(timings):
            outcome = execute(job, spark, timings, background)
        return redact(outcome.line(timings), REDACT.secrets)
    finally:
        if guard is not None:
            lease_guard.stop_active()


__all__ = ["END_FILE", "JOB_FILE", "IDLE_LIMIT_S", "next_spec", "run_batch_dir", "slot_dir"]
