"""A cancel racing the worker (issue 23, item 5), on real SQLite and PostgreSQL stores.

The worker claims its process (PENDING -> SUBMITTED) and reports its application (-> RUNNING) while a
user's cancel arrives at a random moment around those writes. The job cannot finish before the cancel
returns (its commit waits), so every cancel must be accepted: CANCELED from PENDING, CANCELING from
SUBMITTED or RUNNING. A cancel that arrives after the job committed ends SUCCESS without the cancel's
text as its failure reason.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.lifecycle import RunRequest
from airflow_tablemgmt.services.processes import cancel_process
from airflow_tablemgmt.store import Store
from tests.faults.conftest import ROUNDS, Figures
from tests.faults.workers import WAIT, CommitLog, SteeredJob, register, runner, wait_until
from tests.support.threads import in_thread

pytestmark = pytest.mark.faults

S = ProcessStatus
TABLE = "lake.sales.orders"
ACTION = "rewrite-files"
T0 = datetime(2026, 4, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def two_stores(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[Store, Store]]:
    """The worker's store and the canceler's: independent engines on one database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'tms.db'}"
        stores = (Store(url), Store(url))
    else:
        pg = request.getfixturevalue("pg")
        stores = (pg.direct(), pg.direct())
    yield stores
    for s in stores:
        s.dispose()


@pytest.mark.timeout(60 + 20 * ROUNDS)
def test_a_cancel_racing_the_worker_is_always_accepted(
    two_stores: tuple[Store, Store], figures: Figures
) -> None:
    worker_store, user_store = two_stores
    register(worker_store, TABLE, ACTION, "/tmp/tms-faults-wh")
    rng = random.Random(5)
    refused = 0
    outcomes: dict[str, int] = {}
    rounds = 10 * ROUNDS  # cheap rounds: more of them, so the cancel meets each of the worker's writes

    for r in range(rounds):
        log = CommitLog()
        req = RunRequest(TABLE, ACTION, T0 + timedelta(hours=r), holder="cancel-race")
        job = SteeredJob(f"w{r}", log, stall_commit=True)
        run = runner(
            worker_store, job, heartbeat_every=timedelta(seconds=0.05), lease_ttl=timedelta(seconds=5)
        )
        start = threading.Barrier(2)

        def work() -> Any:
            start.wait(WAIT)  # noqa: B023
            return run.run(req)  # noqa: B023

        t, out = in_thread(work)
        start.wait(WAIT)
        time.sleep(rng.uniform(0.0, 0.03))  # around the claim and the start
        row = wait_until("the process row", lambda: user_store.processes.find(TABLE, ACTION, req.instant))  # noqa: B023
        try:
            result = cancel_process(user_store, row.id, source="the race test")
            accepted = result.accepted
            said = result.status
        except Exception as e:  # noqa: BLE001 - counted: a refused cancel
            accepted, said = False, f"{type(e).__name__}: {e}"
        job.before_commit.set()  # only now may the job finish
        t.join(WAIT)
        final = user_store.processes.get(row.id)
        refused += 0 if accepted else 1
        outcomes[f"{said}->{final.status}"] = outcomes.get(f"{said}->{final.status}", 0) + 1
        figures.rounds += 1
        figures.non_terminal += 0 if final.status.is_terminal else 1
        figures.concurrent_jobs += max(0, len(log.commits) - 1)
        assert accepted, (said, final, out)
        assert final.status in (S.CANCELED, S.SUCCESS), (final, out)
        if final.status == S.SUCCESS:  # the job committed before the kill: the table did change
            assert final.failure_reason is None, final
            assert "the race test" in final.summary.get("cancel_after_commit", ""), final.summary
        else:
            assert log.commits == [], log.commits
    figures.notes.update(cancels_refused=refused, outcomes=outcomes)
    print(f"\n{figures}")


def test_a_success_after_a_late_cancel_keeps_no_failure_reason(two_stores: tuple[Store, Store]) -> None:
    worker_store, user_store = two_stores
    register(worker_store, TABLE, ACTION, "/tmp/tms-faults-wh")
    log = CommitLog()
    req = RunRequest(TABLE, ACTION, T0 - timedelta(days=1), holder="late-cancel")
    job = SteeredJob("late", log, stall_commit=True)
    # A heartbeat far off: the job commits before the worker could see the request.
    run = runner(worker_store, job, heartbeat_every=timedelta(seconds=10), lease_ttl=timedelta(seconds=30))
    t, out = in_thread(lambda: run.run(req))
    assert job.started.wait(WAIT), out
    row = wait_until("RUNNING", lambda: user_store.processes.find(TABLE, ACTION, req.instant))
    wait_until("RUNNING", lambda: user_store.processes.get(row.id).status == S.RUNNING)
    assert cancel_process(user_store, row.id, source="bob").status == S.CANCELING
    job.before_commit.set()
    t.join(WAIT)
    final = user_store.processes.get(row.id)
    assert (final.status, final.failure_reason) == (S.SUCCESS, None), final
    assert final.summary == {"by": "late", "cancel_after_commit": "cancel requested from bob"}
