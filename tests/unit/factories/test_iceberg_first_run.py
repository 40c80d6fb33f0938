"""The iceberg factory's first-run policy for expire-data (no JVM): the first run, and the first run
after ``column`` or ``retention`` changed, is a dry run unless ``confirm: true``."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.iceberg.factory import IcebergProcessFactory

NOW = datetime(2026, 3, 10, 0, 30, tzinfo=UTC)
CATALOG = CatalogSpec(name="lake", warehouse="/tmp/warehouse")
FACTORY = IcebergProcessFactory()


def _table(**expire_data: Any) -> TableSpec:
    return TableSpec.model_validate(
        {"catalog": "lake", "namespace": "sales", "name": "orders", "actions": {"expire-data": expire_data}}
    )


def _last(options: dict[str, Any] | None) -> Process:
    return Process(
        id=7,
        table_id="lake.sales.orders",
        action="expire-data",
        instant=NOW,
        status=ProcessStatus.SUCCESS,
        parameters={} if options is None else {"options": options},
        summary={"dry_run": True},
    )


def _job(table: TableSpec, last: Process | None) -> JobSpec:
    job = FACTORY.trigger(
        table, "expire-data", TriggerContext(instant=NOW, catalog=CATALOG, last_success=last)
    )
    assert job is not None
    return job


def test_first_run_is_a_dry_run_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    table = _table(column="order_ts", retention="400d")
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.formats.iceberg.factory"):
        job = _job(table, None)
    assert job.options["dry-run"] is True
    reason = job.options["dry-run-reason"]
    assert reason == (
        "first run of expire-data with retention 400d on column order_ts: dry run; "
        "set confirm: true to delete on the first run"
    )
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "lake.sales.orders" in record.getMessage() and reason in record.getMessage()


def test_next_run_with_the_same_settings_deletes() -> None:
    table = _table(column="order_ts", retention="400d")
    first = _job(table, None)
    second = _job(table, _last(dict(first.options)))
    assert second.options["dry-run"] is False
    assert "dry-run-reason" not in second.options


def test_confirm_deletes_on_the_first_run() -> None:
    job = _job(_table(column="order_ts", retention="400d", confirm=True), None)
    assert job.options["dry-run"] is False and "dry-run-reason" not in job.options


def test_explicit_dry_run_is_kept_without_a_policy_reason() -> None:
    job = _job(_table(column="order_ts", retention="400d", **{"dry-run": True}), _last(None))
    assert job.options["dry-run"] is True and "dry-run-reason" not in job.options


@pytest.mark.parametrize(
    ("previous", "why"),
    [
        ({"column": "created_at", "retention": "400d"}, "column changed from created_at to order_ts"),
        ({"column": "order_ts", "retention": "30d"}, "retention changed from 30d to 400d"),
        (None, "first run of expire-data"),  # a previous run that recorded no options
        ({"column": "order_ts", "retention": "not a duration"}, "retention changed from not a duration"),
    ],
)
def test_changed_settings_make_the_next_run_a_dry_run(previous: dict[str, Any] | None, why: str) -> None:
    job = _job(_table(column="order_ts", retention="400d"), _last(previous))
    assert job.options["dry-run"] is True
    assert why in job.options["dry-run-reason"]
    assert "set confirm: true" in job.options["dry-run-reason"]


def test_same_settings_written_differently_are_not_a_change() -> None:
    # 400d stored by an older run as "9600h", the column in another case: the same settings.
    job = _job(
        _table(column="order_ts", retention="400d"), _last({"column": "ORDER_TS", "retention": "9600h"})
    )
    assert job.options["dry-run"] is False


def test_recover_applies_the_same_policy() -> None:
    table = _table(column="order_ts", retention="400d")
    interrupted = _last(None)
    job = FACTORY.recover(table, interrupted, TriggerContext(instant=NOW, catalog=CATALOG))
    assert job.options["dry-run"] is True and "first run" in job.options["dry-run-reason"]


def test_other_actions_are_untouched() -> None:
    table = TableSpec.model_validate(
        {"catalog": "lake", "namespace": "s", "name": "t", "actions": {"delete-orphans": {}}}
    )
    job = FACTORY.trigger(table, "delete-orphans", TriggerContext(instant=NOW, catalog=CATALOG))
    assert job is not None and "dry-run-reason" not in job.options and job.options["dry-run"] is False
