"""The reaper and a takeover judge a row by the heartbeat interval its own worker promised (issue 23,
item 2), recorded on the row when the attempt is claimed (migration 0004). SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_tablemgmt.core.process import ProcessStatus
from tests.integration.store.test_store_reaper import backdate, process_in

pytestmark = pytest.mark.integration

S = ProcessStatus


def test_a_row_is_reaped_only_after_two_of_its_own_promised_beats(store):
    slow = process_in(store, 0, S.SUBMITTED, S.RUNNING, heartbeat_every_s=60.0)  # promised: every 60 s
    plain = process_in(store, 1, S.SUBMITTED, S.RUNNING)  # no promise recorded (an older worker)
    overdue = process_in(store, 2, S.SUBMITTED, S.RUNNING, heartbeat_every_s=60.0)
    for p, ago in ((slow, 100), (plain, 100), (overdue, 130)):
        backdate(store, p.id, timedelta(seconds=ago), "heartbeat_at")
    assert store.processes.get(slow.id).heartbeat_every_s == 60.0

    reaped = {r.process.id for r in store.processes.reap(timedelta(seconds=90))}

    # 100 s without a beat is past stale_after (90 s) but within two 60 s beats: still alive.
    assert reaped == {plain.id, overdue.id}
    assert store.processes.get(slow.id).status == S.RUNNING
    assert "more than 120s ago" in (store.processes.get(overdue.id).failure_reason or "")


def test_a_new_attempt_forgets_the_previous_workers_promise(store):
    p = process_in(store, 0, S.SUBMITTED, heartbeat_every_s=60.0)
    p = store.processes.transition(p.id, S.FAILED, expected=S.SUBMITTED, attempt=p.attempt)
    again = store.processes.new_attempt(p.id, expected=S.FAILED)
    assert (again.attempt, again.heartbeat_every_s) == (2, None)
