"""compute-stats and rewrite-files on one table (issue 23, item 4), PostgreSQL.

``compute_table_stats`` writes a Puffin file and commits it to the table's metadata
(``UpdateStatistics``: a new metadata file through the catalog), so it takes the table's lease like
every action that commits. Each round starts a rewrite-files job that holds the table for a while and,
at a random moment around it, a compute-stats that retries (as the operator's deferral does) while
the lease is held; the order is swapped every other round. Both jobs are
:class:`~tests.faults.workers.SteeredJob` stand-ins that record when they run. Counted: rounds in
which the two jobs ran at the same time (before the change: every round), runs refused the lease
and retried.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.lifecycle import RunOutcome, RunRequest
from airflow_tablemgmt.store import Store
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.workers import WAIT, CommitLog, SteeredJob, runner
from tests.support.threads import in_thread

pytestmark = pytest.mark.faults

S = ProcessStatus
TABLE = "lake.sales.orders"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _register(store: Store) -> None:
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/tms-faults-wh"), Owner.STORE)
    spec = TableSpec.model_validate(
        {
            "catalog": "lake",
            "namespace": "sales",
            "name": "orders",
            "actions": {"rewrite-files": {}, "compute-stats": {}},
        }
    )
    store.tables.upsert(spec, Owner.STORE)


def _run_until_leased(store: Store, job: SteeredJob, req: RunRequest) -> tuple[RunOutcome, int]:
    """Run ``req``, retrying every 50 ms while the table is leased (the operator defers likewise)."""
    refused = 0
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return runner(store, job).run(req), refused
        except LeaseUnavailable:
            refused += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_compute_stats_commits_so_it_takes_the_lease() -> None:
    assert ACTIONS.get("compute-stats").mutates


@pytest.mark.timeout(60 + 20 * ROUNDS)
def test_compute_stats_and_rewrite_files_never_run_at_once(pg: PgStores, figures: Figures) -> None:
    stores = [pg.direct(), pg.direct()]
    _register(stores[0])
    rng = random.Random(23)
    refused = 0

    def one_round(r: int) -> None:
        nonlocal refused
        log = CommitLog()
        instant = T0 + timedelta(hours=r)
        first, second = (
            ("rewrite-files", "compute-stats") if r % 2 == 0 else ("compute-stats", "rewrite-files")
        )
        job_1 = SteeredJob(first, log, stall_commit=True)
        job_2 = SteeredJob(second, log)
        t_1, out_1 = in_thread(lambda: _run_until_leased(stores[0], job_1, RunRequest(TABLE, first, instant)))
        assert job_1.started.wait(WAIT), out_1
        t_2, out_2 = in_thread(
            lambda: _run_until_leased(stores[1], job_2, RunRequest(TABLE, second, instant))
        )
        time.sleep(rng.uniform(0.2, 0.6))  # the second keeps asking while the first holds the table
        job_1.before_commit.set()
        t_1.join(WAIT)
        t_2.join(WAIT)
        figures.rounds += 1
        figures.concurrent_jobs += max(0, log.max_concurrent - 1)
        for out in (out_1, out_2):
            assert out and isinstance(out[0], tuple), out
            outcome, n = out[0]
            refused += n
            figures.non_terminal += 0 if outcome.process.status.is_terminal else 1
            assert outcome.process.status == S.SUCCESS, outcome.process
        assert log.max_concurrent == 1, f"{first} and {second} ran at once (round {r})"
        assert sorted(log.commits) == ["compute-stats", "rewrite-files"], log.commits

    for r in range(max(2, ROUNDS)):
        one_round(r)
    figures.notes["lease_refusals_retried"] = refused
    assert refused > 0  # the second job was refused while the first held the table, every round
    print(f"\n{figures}")
