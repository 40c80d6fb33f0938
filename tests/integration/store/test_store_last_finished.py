"""The last refresh to finish successfully, whatever its instant (issue 41: an incremental refresh adds the
sources' change to what the last *committed* refresh left; a backfilled or REST refresh at an older schedule
time can run after a newer one), on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.store import Store
from tests.integration.store.test_store_processes import T0, run_to

pytestmark = pytest.mark.integration

TABLE, ACTION = "lake.db.daily", "refresh"


def test_the_success_that_finished_last_not_the_newest_instant(store: Store) -> None:
    assert store.processes.last_finished_success(TABLE, ACTION) is None
    newer = store.processes.open(TABLE, ACTION, T0 + timedelta(hours=5))[0]
    newer = run_to(store, newer, S.SUBMITTED, S.RUNNING, S.SUCCESS)
    time.sleep(0.01)  # the databases' clocks stamp finished_at
    older = store.processes.open(TABLE, ACTION, T0 + timedelta(hours=1))[0]
    older = run_to(store, older, S.SUBMITTED, S.RUNNING, S.SUCCESS)
    failed = store.processes.open(TABLE, ACTION, T0 + timedelta(hours=2))[0]
    run_to(store, failed, S.SUBMITTED, S.FAILED)
    store.processes.open(TABLE, ACTION, T0 + timedelta(hours=3))  # still PENDING: no finished_at
    store.processes.open("lake.db.other", ACTION, T0)

    assert store.processes.last_successful(TABLE, ACTION) == newer  # by instant
    assert store.processes.last_finished_success(TABLE, ACTION) == older  # by when it finished
    assert store.processes.last_finished_success(TABLE, "expire-snapshots") is None
