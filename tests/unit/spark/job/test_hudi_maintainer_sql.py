"""The statements the Hudi compaction, archive and clean maintainers send: every procedure that takes
``path`` gets the table's location (a session-catalog name would make Hudi read the table to resolve it,
docs/formats.md, *Wall time against the bare procedure*); ``run_clean``, which takes a name only, gets the
name registered once per session. Hudi 1.0.2's parameter lists, read from the bundle's procedure classes:
``run_compaction``, ``show_compaction``, ``run_clustering``, ``show_clustering`` and ``archive_commits`` have
``table`` and ``path``; ``run_clean`` has ``table`` only; ``run_rollback_inflight_tableservice`` lists ``path``
but reads ``table`` (clustering.py registers the table for it)."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.hudi.actions import HudiArchiveSettings, HudiCleanSettings
from airflow_tablemgmt.formats.hudi.job.archive import archive_sql
from airflow_tablemgmt.formats.hudi.job.clean import clean_sql
from airflow_tablemgmt.formats.hudi.job.compaction import run_sql, schedule_sql, show_sql
from airflow_tablemgmt.formats.hudi.job.table import path_arg, register, register_sql

LOC = "s3a://lake/app/it's"  # a quote in the path stays inside the literal


def test_path_arg_quotes_the_location() -> None:
    assert path_arg("/w/app/events") == "path => '/w/app/events'"
    assert path_arg(LOC) == "path => 's3a://lake/app/it\\'s'"


def test_compaction_takes_the_table_by_path() -> None:
    assert show_sql("/w/app/events") == "CALL show_compaction(path => '/w/app/events')"
    assert schedule_sql("/w/app/events", 2) == (
        "CALL run_compaction(op => 'schedule', path => '/w/app/events', "
        "options => 'hoodie.compact.inline.max.delta.commits=2')"
    )
    assert run_sql("/w/app/events", "20261126045001123") == (
        "CALL run_compaction(op => 'run', path => '/w/app/events', timestamp => 20261126045001123)"
    )
    assert all("table =>" not in sql for sql in (show_sql(LOC), schedule_sql(LOC, 5), run_sql(LOC, "1")))


def test_archive_takes_the_table_by_path() -> None:
    s = HudiArchiveSettings.model_validate({"min-commits": 20, "max-commits": 30, "retain-commits": 10})
    assert archive_sql("/w/app/events", s, metadata_table=False) == (
        "CALL archive_commits(path => '/w/app/events', min_commits => 20, max_commits => 30, "
        "retain_commits => 10, enable_metadata => false)"
    )
    assert archive_sql("/w/app/events", s, metadata_table=True).endswith("enable_metadata => true)")


def test_clean_takes_the_registered_name() -> None:
    s = HudiCleanSettings.model_validate({"retain-commits": 3})
    assert clean_sql("tms_hudi_app_events", s) == (
        "CALL run_clean(table => 'tms_hudi_app_events', clean_policy => 'KEEP_LATEST_COMMITS', "
        "retain_commits => 3, hours_retained => 24, file_versions_retained => 1)"
    )


class _Statements:
    """Stands in for a session's ``sql`` (a real one is a JVM): records what is sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def sql(self, statement: str) -> Any:
        self.sent.append(statement)


def test_the_table_is_registered_once_per_session() -> None:
    t = TableIdentifier("lake", "app", "events")
    first, second = _Statements(), _Statements()
    assert register(first, t, "/w/app/events") == "tms_hudi_app_events"  # type: ignore[arg-type]
    assert register(first, t, "/w/app/events") == "tms_hudi_app_events"  # type: ignore[arg-type]
    register(second, t, "/w/app/events")  # type: ignore[arg-type]
    expected = register_sql("tms_hudi_app_events", "/w/app/events")
    assert expected == "CREATE TABLE IF NOT EXISTS `tms_hudi_app_events` USING hudi LOCATION '/w/app/events'"
    assert first.sent == [expected] and second.sent == [expected]
