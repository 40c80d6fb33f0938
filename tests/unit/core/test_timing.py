"""Unsafe timing settings are rejected where they are made, naming both values and the rule
(issue 23, item 2): core.timing, the operator's constructor and execute (a cluster policy), the CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.core.timing import UnsafeTiming, check_timing, stale_bound

sec = lambda s: timedelta(seconds=s)  # noqa: E731


@pytest.mark.parametrize(
    ("lease", "beat", "stale", "words"),
    [
        (20, 20, 15, ["lease_ttl 20s", "heartbeat_every 20s", "lease_ttl >= 3 x heartbeat_every"]),
        (50, 20, 45, ["lease_ttl 50s", "heartbeat_every 20s", "at least 60s"]),
        (120, 20, 20, ["stale_after 20s", "heartbeat_every 20s", "stale_after >= 2 x heartbeat_every"]),
        (120, 20, 30, ["stale_after 30s", "heartbeat_every 20s", "at least 40s"]),
        (120, 20, 120, ["stale_after 120s", "lease_ttl 120s", "stale_after < lease_ttl"]),
        (120, 0, 90, ["heartbeat_every must be a positive duration"]),
    ],
)
def test_unsafe_settings_are_rejected_naming_both_values_and_the_rule(lease, beat, stale, words):
    with pytest.raises(UnsafeTiming) as e:
        check_timing(lease_ttl=sec(lease), heartbeat_every=sec(beat), stale_after=sec(stale), where="here")
    for word in words:
        assert word in str(e.value), str(e.value)
    assert str(e.value).startswith("here: ")


def test_the_defaults_and_the_distributed_policy_are_safe():
    check_timing(lease_ttl=sec(120), heartbeat_every=sec(20), stale_after=sec(90))
    check_timing(lease_ttl=sec(30), heartbeat_every=sec(5), stale_after=sec(20))


def test_stale_bound_takes_the_promised_interval_when_longer():
    assert stale_bound(sec(90), None) == sec(90)
    assert stale_bound(sec(90), 20.0) == sec(90)
    assert stale_bound(sec(90), 60.0) == sec(120)


def test_the_operator_rejects_them_at_construction_and_at_execute():
    from airflow.sdk import DAG

    from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator

    t = {"table": "lake.db.t", "action": "rewrite-files"}
    with DAG("tms__timing", schedule=None, start_date=datetime(2024, 1, 1, tzinfo=UTC)):
        with pytest.raises(UnsafeTiming, match=r"heartbeat_every 2m.*lease_ttl|lease_ttl 120s is too close"):
            TableMaintenanceOperator(task_id="bad", heartbeat_every=sec(120), **t)
        with pytest.raises(UnsafeTiming, match="stale_after 10s"):
            TableMaintenanceOperator(task_id="bad2", stale_after=sec(10), **t)
        op = TableMaintenanceOperator(task_id="ok", **t)
    op.heartbeat_every = sec(60)  # what a cluster policy may do after the constructor
    with pytest.raises(UnsafeTiming, match="TableMaintenanceOperator ok: lease_ttl 120s"):
        op.execute({})


def test_the_cli_rejects_an_unsafe_stale_after(tmp_path, capsys):
    from airflow_tablemgmt.cli import main

    url = f"sqlite:///{tmp_path / 'tms.db'}"
    assert main(["--store-url", url, "run", "lake.db.t", "rewrite-files", "--stale-after", "10"]) == 2
    err = capsys.readouterr().err
    assert "--stale-after: stale_after 10s" in err and "heartbeat_every 20s" in err, err
    assert main(["--store-url", url, "run", "lake.db.t", "rewrite-files", "--stale-after", "150"]) == 2
    assert "stale_after < lease_ttl" in capsys.readouterr().err
