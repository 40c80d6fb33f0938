"""The operators keep their fixed defaults on the class (a full parse builds one per DAG); each
instance still ends up with exactly the values it was given."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_tablemgmt.operators.gate import SnapshotGateOperator
from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator

T = {"table": "lake.db.t", "action": "rewrite-files"}


class SlowPoll(TableMaintenanceOperator):
    lease_poll = timedelta(minutes=5)


def test_operator_arguments_win_over_class_defaults_and_survive_a_copy() -> None:
    with DAG("tms__defaults", schedule=None, start_date=datetime(2024, 1, 1, tzinfo=UTC)):
        plain = TableMaintenanceOperator(task_id="plain", **T)
        given = TableMaintenanceOperator(
            task_id="given",
            tablemgmt_conn_id="tms_x",
            spark_conn_id="spark_x",
            lease_wait=timedelta(minutes=2),
            lease_poll=timedelta(seconds=5),
            gate="event",
            **T,
        )
        sub = SlowPoll(task_id="sub", **T)  # the argument's default, as before: 30 s
        gate = SnapshotGateOperator(task_id="gate", tablemgmt_conn_id="tms_x", **T)
        gate_plain = SnapshotGateOperator(task_id="gate_plain", **T)
    assert (plain.tablemgmt_conn_id, plain.spark_conn_id) == ("tablemgmt_default", "spark_default")
    assert (plain.lease_wait, plain.lease_poll, plain._runner) == (
        timedelta(hours=1),
        timedelta(seconds=30),
        None,
    )
    assert "lease_poll" not in vars(plain) and "gate" not in vars(plain)  # read from the class
    assert plain.gate is None
    for op in (given, copy.deepcopy(given)):
        assert (op.tablemgmt_conn_id, op.spark_conn_id) == ("tms_x", "spark_x")
        assert (op.lease_wait, op.lease_poll) == (timedelta(minutes=2), timedelta(seconds=5))
        assert op.gate == "event"
    assert plain.lease_poll == timedelta(seconds=30)  # another instance's value never leaks
    assert sub.lease_poll == timedelta(seconds=30)
    assert (gate.tablemgmt_conn_id, gate_plain.tablemgmt_conn_id) == ("tms_x", "tablemgmt_default")
