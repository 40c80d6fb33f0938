"""A factory set-up slower than the lease TTL (issue 36, item 3), SQLite and PostgreSQL.

Worker A takes the table's lease, then its factory reads the table's metadata for longer than the lease
TTL (the slow read is the factory's ``trigger``, stretched); meanwhile worker B, another action on the
table retrying all along as the operator's deferral does, takes the lapsed lease and runs a job that
holds the table. A must not submit its job: the lease is renewed right before submit and refused
because B holds it. Both jobs are :class:`~tests.faults.workers.SteeredJob` stand-ins recording when they
run. Counted: rounds in which the two jobs ran at the same time (before the change: A submitted beside B
and was stopped only by its watchdog's first tick), rows left non-terminal; in the notes, the rounds in
which A submitted because nobody had taken the lapsed lease yet (it renewed it, and B waited).
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import RunRequest, WorkerSuperseded
from airflow_tablemgmt.store import Store
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.workers import WAIT, CommitLog, SteeredJob, runner, wait_until
from tests.support.threads import in_thread

pytestmark = pytest.mark.faults

S = ProcessStatus
TABLE = "lake.sales.orders"
T0 = datetime(2026, 8, 1, tzinfo=UTC)
BEAT = timedelta(seconds=0.3)
TTL = timedelta(seconds=1.5)
STALE = timedelta(seconds=0.9)


class SlowSetUp:
    """The real factories; the table's set-up (``trigger``) takes ``seconds`` first."""

    def __init__(self, seconds: float) -> None:
        self.inner = default_factories()
        self.seconds = seconds

    def for_action(self, fmt: Any, action: str) -> Any:
        factory = self.inner.for_action(fmt, action)
        seconds = self.seconds

        class Slow:
            def __getattr__(self, name: str) -> Any:
                return getattr(factory, name)

            def trigger(self, table: Any, action: str, ctx: Any) -> Any:
                time.sleep(seconds)
                return factory.trigger(table, action, ctx)

        return Slow()


class _NONE:  # noqa: N801 - no lease row yet
    holder = ""


def _register(store: Store) -> None:
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/tms-faults-wh"), Owner.STORE)
    actions = {"rewrite-files": {}, "rewrite-manifests": {}}
    store.tables.upsert(
        TableSpec(catalog="lake", namespace="sales", name="orders", actions=actions), Owner.STORE
    )


def _scenario(stores: tuple[Store, Store], figures: Figures) -> None:
    store_a, store_b = stores
    _register(store_a)
    rng = random.Random()
    failures: list[str] = []
    for r in range(ROUNDS):
        log = CommitLog()
        job_a, job_b = SteeredJob("A", log), SteeredJob("B", log, stall_commit=True)
        when = T0 + timedelta(days=r)
        setup = TTL.total_seconds() * rng.uniform(1.6, 3.0)
        run_a = runner(store_a, job_a, heartbeat_every=BEAT, lease_ttl=TTL, stale_after=STALE)
        run_a.factories = SlowSetUp(setup)  # type: ignore[assignment]
        t_a, out_a = in_thread(lambda: run_a.run(RunRequest(TABLE, "rewrite-files", when, holder="a")))  # noqa: B023

        def b_runs() -> Any:
            deadline = time.monotonic() + WAIT
            while True:
                try:
                    return runner(store_b, job_b, heartbeat_every=BEAT, lease_ttl=TTL, stale_after=STALE).run(  # noqa: B023
                        RunRequest(TABLE, "rewrite-manifests", when, holder="b")  # noqa: B023
                    )
                except LeaseUnavailable:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)

        wait_until(
            "A to hold the lease, in its set-up", lambda: ":a:" in (store_b.leases.get(TABLE) or _NONE).holder
        )
        t_b, out_b = in_thread(b_runs)
        t_a.join(WAIT)
        time.sleep(0.2)
        job_b.before_commit.set()  # B ends once A's attempt is over
        t_b.join(WAIT)
        assert not t_a.is_alive() and not t_b.is_alive()
        [res_a], [res_b] = out_a, out_b
        submitted_a = job_a.entered.is_set()
        figures.rounds += 1
        figures.concurrent_jobs += int(log.max_concurrent > 1)
        rows = [store_a.processes.find(TABLE, a, when) for a in ("rewrite-files", "rewrite-manifests")]
        figures.non_terminal += sum(1 for p in rows if p is not None and p.status in (S.SUBMITTED, S.RUNNING))
        figures.notes.setdefault("a_submitted", 0)
        figures.notes["a_submitted"] += int(submitted_a)
        what = f"round {r} (set-up {setup:.2f}s, A submitted {submitted_a}): A {res_a!r}, B {res_b!r}"
        # A submits only when nobody had taken the lapsed lease yet (it renewed it, and B waited for A);
        # when B took it during A's set-up, A refuses to submit and its row stays PENDING for its next look.
        a_refused = isinstance(res_a, LeaseUnavailable) and "during the job's set-up" in str(res_a)
        # B runs (or, on an overloaded machine, its own watchdog stops it: never beside A)
        b_status = str(getattr(getattr(res_b, "process", None), "status", None))
        if log.max_concurrent > 1:
            failures.append(f"A's job ran beside B's: {what}")
        elif isinstance(res_a, BaseException) if submitted_a else not a_refused:
            failures.append(f"A neither ran nor refused to submit: {what}")
        elif not (isinstance(res_b, WorkerSuperseded) or b_status == "SUCCESS"):
            failures.append(f"B failed: {what}")
        elif not submitted_a and (rows[0] is None or rows[0].status != S.PENDING):
            failures.append(f"A's row not left PENDING for its next look: {what}")
    # every round runs (the counts are the proof), then any failing round fails the test
    assert not failures, f"{len(failures)} of {figures.rounds} rounds:\n" + "\n".join(failures)


@pytest.mark.timeout(60 + 10 * ROUNDS)
def test_a_set_up_slower_than_the_lease_never_submits_sqlite(tmp_path: Any, figures: Figures) -> None:
    url = f"sqlite:///{tmp_path / 'tms.db'}"
    _scenario((Store(url), Store(url)), figures)


@pytest.mark.timeout(60 + 10 * ROUNDS)
def test_a_set_up_slower_than_the_lease_never_submits_postgres(pg: PgStores, figures: Figures) -> None:
    _scenario((pg.direct(), pg.direct()), figures)
