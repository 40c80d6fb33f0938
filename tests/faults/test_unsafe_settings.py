"""Unsafe timing settings (issue 23, item 2), PostgreSQL.

The settings that let a second worker's job overlap the first (``heartbeat_every >= lease_ttl`` or too
close to it) or get a live worker's row reaped (``heartbeat_every >= stale_after``) are refused where
they are made: the operator and ``tablemgmt run``. At the tightest settings still accepted
(``lease_ttl = 3 x heartbeat_every``, ``stale_after = 2 x heartbeat_every``) a worker running a job
several leases long, with a second worker trying the same process all along (and retrying after a
failure, as Airflow would), never runs two jobs at once nor one twice. On a loaded machine a beat can be
late by more than one interval at sub-second settings: the lease watchdog then stops the first job early
(safe: counted as ``stopped_early``) and the second worker runs it.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.core.errors import JobFailed, LeaseUnavailable, UnsafeTiming
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.lifecycle import RunOutcome, RunRequest
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.workers import WAIT, CommitLog, SteeredJob, register, runner
from tests.support.threads import in_thread

pytestmark = pytest.mark.faults

S = ProcessStatus
TABLE = "lake.sales.orders"
ACTION = "rewrite-files"
T0 = datetime(2026, 6, 1, tzinfo=UTC)
sec = lambda s: timedelta(seconds=s)  # noqa: E731

UNSAFE = [  # (lease_ttl, heartbeat_every, stale_after): each one the issue reproduced, or its neighbour
    (sec(120), sec(120), sec(90)),
    (sec(120), sec(150), sec(90)),
    (sec(120), sec(50), sec(110)),
    (sec(120), sec(20), sec(20)),
    (sec(120), sec(60), sec(60)),
    (sec(120), sec(20), sec(120)),
]


def test_unsafe_settings_are_refused_by_the_operator_and_the_cli(tmp_path, capsys, figures: Figures) -> None:
    from airflow_tablemgmt.cli import main
    from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator

    accepted = 0
    for i, (lease, beat, stale) in enumerate(UNSAFE):
        try:
            TableMaintenanceOperator(
                task_id=f"t{i}",
                table=TABLE,
                action=ACTION,
                lease_ttl=lease,
                heartbeat_every=beat,
                stale_after=stale,
            )
            accepted += 1
        except UnsafeTiming as e:
            assert f"{beat.total_seconds():g}s" in str(e) or f"{stale.total_seconds():g}s" in str(e), e
        figures.rounds += 1
    url = f"sqlite:///{tmp_path / 'tms.db'}"
    for stale in (10, 30, 120, 500):  # against the run's heartbeat 20 s and lease 120 s
        accepted += int(main(["--store-url", url, "run", TABLE, ACTION, "--stale-after", str(stale)]) != 2)
        assert "stale_after" in capsys.readouterr().err
        figures.rounds += 1
    figures.notes["unsafe_settings_accepted"] = accepted
    assert accepted == 0


@pytest.mark.timeout(60 + 30 * ROUNDS)
def test_the_tightest_accepted_settings_run_one_job(pg: PgStores, figures: Figures) -> None:
    observer = pg.direct()
    register(observer, TABLE, ACTION, "/tmp/tms-faults-wh")
    beat = sec(0.5)
    tight = {"heartbeat_every": beat, "lease_ttl": 3 * beat, "stale_after": 2 * beat}
    stopped_early = 0
    for r in range(ROUNDS):
        log = CommitLog()
        req = RunRequest(TABLE, ACTION, T0 + timedelta(hours=r), holder="tight")
        job_a = SteeredJob("A", log, stall_commit=True)
        t_a, out_a = in_thread(lambda: runner(pg.direct(), job_a, **tight).run(req))  # noqa: B023
        assert job_a.started.wait(WAIT), out_a
        done = threading.Event()
        tries = [0]

        def worker_b() -> None:
            run_b = runner(pg.direct(), SteeredJob("B", log), **tight)  # noqa: B023
            while not done.is_set():  # noqa: B023
                tries[0] += 1  # noqa: B023
                try:
                    run_b.run(req)  # noqa: B023
                    return
                except LeaseUnavailable:
                    time.sleep(0.05)
                except JobFailed:  # A stopped early: the process failed, Airflow would retry it
                    time.sleep(0.05)

        t_b = threading.Thread(target=worker_b, daemon=True)
        t_b.start()
        time.sleep(10 * beat.total_seconds())  # the job runs for more than three lease TTLs
        job_a.before_commit.set()
        t_a.join(WAIT)
        t_b.join(WAIT)
        done.set()
        final = observer.processes.find(TABLE, ACTION, req.instant)
        figures.rounds += 1
        figures.concurrent_jobs += max(0, log.max_concurrent - 1) + max(0, len(log.commits) - 1)
        figures.non_terminal += 0 if final is not None and final.status.is_terminal else 1
        stopped_early += int(not isinstance(out_a[0], RunOutcome))
        assert len(log.commits) == 1 and log.max_concurrent == 1, (log.commits, out_a)
        assert final is not None and final.status == S.SUCCESS, final
        assert (final.attempt == 1) == (log.commits == ["A"]), (final, log.commits)
    figures.notes["stopped_early"] = stopped_early
    print(f"\n{figures}")
