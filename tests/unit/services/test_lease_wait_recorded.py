"""The runner stamps when an attempt takes the table's lease, so ``timings`` tells the lease wait
apart from the queue wait: a process refused the lease stays PENDING without a stamp, and when a later
try takes it the lease wait is the time from its opening to then (real runner, real SQLite store,
stand-in Spark submitter)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.lifecycle import RunRequest
from airflow_tablemgmt.services.processes import timings
from tests.support.threads import in_thread
from tests.unit.lifecycle.stand_ins import StandInSubmitter, instant, make_store, runner

TABLE = "lake.sales.orders"


def test_the_lease_wait_is_opened_to_lease_taken(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.tables.upsert(
        TableSpec.model_validate(
            {
                "catalog": "lake",
                "namespace": "sales",
                "name": "orders",
                "actions": {"rewrite-files": {}, "compute-stats": {}},
            }
        ),
        Owner.STORE,
    )
    hold = threading.Event()
    first = StandInSubmitter(hold=hold)
    t, out = in_thread(
        lambda: runner(store, first, tmp_path).run(RunRequest(TABLE, "rewrite-files", instant(1)))
    )
    try:
        assert first.submitting.wait(30)
        with pytest.raises(LeaseUnavailable):
            runner(store, StandInSubmitter(), tmp_path).run(RunRequest(TABLE, "compute-stats", instant(1)))
        waiting = store.processes.find(TABLE, "compute-stats", instant(1))
        assert waiting is not None and waiting.lease_acquired_at is None  # PENDING, waiting for the lease
        time.sleep(1.0)
    finally:
        hold.set()
        t.join(30)
    assert out and not isinstance(out[0], BaseException), out
    holder = store.processes.find(TABLE, "rewrite-files", instant(1))
    assert holder is not None and holder.lease_acquired_at is not None
    done = (
        runner(store, StandInSubmitter(), tmp_path)
        .run(RunRequest(TABLE, "compute-stats", instant(1)))
        .process
    )
    t2 = timings(done)
    assert done.created_at is not None and done.lease_acquired_at is not None and done.started_at is not None
    assert t2["lease_wait_s"] is not None and t2["lease_wait_s"] >= 1.0  # opened, refused, taken a try later
    assert t2["queue_wait_s"] is not None and t2["wait_s"] is not None
    assert abs(t2["lease_wait_s"] + t2["queue_wait_s"] - t2["wait_s"]) < 0.01
