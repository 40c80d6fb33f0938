"""The final RUNNING -> SUCCESS write meets a dropped connection (issue 23, item 6), PostgreSQL.

The job commits, and at that moment the worker's route to the store is cut (every connection closed,
new ones refused) for 0.3-3 s: the worker retries its final write with backoff and records SUCCESS,
once. A longer outage, past the retries, is
``test_workers.py::test_store_unreachable_mid_run_fails_clearly_and_the_next_try_recovers``: there the
next attempt finds the committed result and records it instead of running the job again.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.lifecycle import RunOutcome, RunRequest
from airflow_tablemgmt.lifecycle.results import default_result_dir
from airflow_tablemgmt.spark.protocol import JobResult
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.workers import CommitLog, SteeredJob, register, runner

pytestmark = pytest.mark.faults

S = ProcessStatus
TABLE = "lake.sales.orders"
ACTION = "rewrite-files"
T0 = datetime(2026, 5, 1, tzinfo=UTC)


class CutAfterCommit(SteeredJob):
    """Commits, then cuts the worker's route to the store for ``outage`` seconds before returning."""

    def __init__(self, name: str, log: CommitLog, pg: PgStores, outage: float) -> None:
        super().__init__(name, log)
        self.pg, self.outage = pg, outage

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        result = super().submit(job, on_started)
        self.pg.proxy.cut()
        threading.Timer(self.outage, self.pg.proxy.restore).start()
        return result


@pytest.mark.timeout(60 + 20 * ROUNDS)
def test_a_dropped_final_write_is_retried_and_recorded_once(pg: PgStores, figures: Figures) -> None:
    observer = pg.direct()
    register(observer, TABLE, ACTION, "/tmp/tms-faults-wh")
    rng = random.Random(6)
    for r in range(ROUNDS):
        log = CommitLog()
        req = RunRequest(TABLE, ACTION, T0 + timedelta(hours=r), holder="final-write")
        job = CutAfterCommit("A", log, pg, outage=rng.uniform(0.3, 3.0))
        run = runner(
            pg.proxied(), job, heartbeat_every=timedelta(seconds=0.5), lease_ttl=timedelta(seconds=30)
        )
        try:
            outcome: RunOutcome | BaseException = run.run(req)
        except BaseException as e:  # noqa: BLE001 - counted below
            outcome = e
        pg.proxy.restore()
        final = observer.processes.find(TABLE, ACTION, req.instant)
        figures.rounds += 1
        figures.rows_lost += 0 if final is not None and final.status == S.SUCCESS else 1
        figures.rows_duplicated += max(0, len(log.commits) - 1)
        figures.non_terminal += 0 if final is not None and final.status.is_terminal else 1
        assert isinstance(outcome, RunOutcome), (job.outage, outcome)
        assert final is not None and (final.status, final.attempt, final.summary) == (
            S.SUCCESS,
            1,
            {"by": "A"},
        )
        assert log.commits == ["A"]
        assert list(Path(default_result_dir()).glob("*.json")) == []  # recorded: no result file left
    print(f"\n{figures}")
