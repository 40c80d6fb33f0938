"""The engine choice ([tablemgmt] spark_connect_conn_id / spark_connect_tables) and the Connect URL."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.hooks.engine import engine_for, selected, submitter_for
from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook, connect_url
from airflow_tablemgmt.hooks.spark_job import SparkJobHook


@pytest.fixture(autouse=True)
def _no_config(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("AIRFLOW_CONFIG", str(tmp_path / "absent.cfg"))
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID", raising=False)
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__SPARK_CONNECT_TABLES", raising=False)


def test_spark_submit_is_the_default() -> None:
    assert engine_for("lake.db.t", "rewrite-files") is None
    assert isinstance(submitter_for("lake.db.t", "rewrite-files"), SparkJobHook)


def test_a_connect_connection_runs_every_table_when_no_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID", "warm")
    hook = submitter_for("lake.db.t", "rewrite-files")
    assert isinstance(hook, SparkConnectJobHook) and hook.conn_id == "warm"


def test_refresh_stays_on_spark_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID", "warm")
    assert engine_for("lake.db.dyn", "refresh") is None


@pytest.mark.parametrize(
    ("patterns", "table", "expected"),
    [
        ("lake", "lake.db.t", True),
        ("lake", "other.db.t", False),
        ("lake.db.*", "lake.db.t", True),
        ("lake.db.x, other", "other.ns.t", True),
        ("lake.db.x", "lake.db.t", False),
        ("", "any.db.t", True),
        ("*", "any.db.t", True),
    ],
)
def test_selection_by_catalog_or_table(patterns: str, table: str, expected: bool) -> None:
    assert selected(table, patterns) is expected


def test_selection_from_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID", "warm")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__SPARK_CONNECT_TABLES", "lake")
    assert engine_for("lake.db.t", "rewrite-files") == "warm"
    assert engine_for("other.db.t", "rewrite-files") is None


def test_connect_url_from_connection_fields() -> None:
    assert connect_url("sc://spark", None) == "sc://spark:15002"
    assert connect_url("spark", 15010) == "sc://spark:15010"
    assert connect_url("sc://spark:1", 2) == "sc://spark:1"
    url = connect_url("spark", 15002, {"use_ssl": True, "token": "t0k"})
    assert url == "sc://spark:15002/;use_ssl=true;token=t0k"
    with pytest.raises(ValueError, match="sc://"):
        connect_url("http://spark", None)
