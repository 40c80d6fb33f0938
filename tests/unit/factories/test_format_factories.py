"""The Delta and Hudi factories: what each format declares, when the log / timeline says there is work,
vacuum's first-run dry run, and compaction's instant on a retry (logs and timelines laid out on disk as
the formats write them; no JVM)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import ActionNotSupported
from airflow_tablemgmt.core.factory import ProcessFactory, TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.factories.discovery import load_factories
from airflow_tablemgmt.formats.delta.factory import DeltaProcessFactory
from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory

NOW = datetime(2026, 11, 25, tzinfo=UTC)


def context(warehouse: Path, last: Process | None = None) -> TriggerContext:
    catalog = CatalogSpec(name="lake", type="hadoop", warehouse=str(warehouse), properties={})
    return TriggerContext(instant=NOW, catalog=catalog, last_success=last)


def spec(fmt: str, actions: dict) -> TableSpec:
    return TableSpec(catalog="lake", namespace="ns", name="t", format=fmt, actions=actions)


def delta_commit(root: Path, version: int, operation: str, adds: int) -> None:
    log = root / "ns" / "t" / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [{"commitInfo": {"operation": operation}}]
    lines += [
        {"add": {"path": f"f{version}-{i}.parquet", "size": 1, "dataChange": operation != "OPTIMIZE"}}
        for i in range(adds)
    ]
    (log / f"{version:020d}.json").write_text("\n".join(map(json.dumps, lines)))


def hudi_timeline(root: Path, names: list[str]) -> None:
    hoodie = root / "ns" / "t" / ".hoodie"
    (hoodie / "timeline").mkdir(parents=True)
    (hoodie / "hoodie.properties").write_text("hoodie.table.type=MERGE_ON_READ\n")
    for n in names:
        (hoodie / "timeline" / n).write_text("")


def test_each_format_declares_its_actions_triggers_engines_and_session() -> None:
    for factory, fmt, actions in (
        (DeltaProcessFactory(), "delta", {"optimize", "vacuum"}),
        (HudiProcessFactory(), "hudi", {"compaction", "clean", "clustering", "archive"}),
    ):
        assert isinstance(factory, ProcessFactory)
        assert factory.supported_actions() == {fmt: actions}
        rows = factory.descriptor.rows()
        assert {r["action"] for r in rows} == actions
        assert all(r["engines"] == ["spark-submit"] and r["format"] == fmt for r in rows)
        assert factory.descriptor.session.needs == (fmt,)
        with pytest.raises(ActionNotSupported, match="supported"):
            factory.trigger_strategy("iceberg", next(iter(actions)))


def test_the_entry_points_find_both_factories() -> None:
    registry = load_factories()
    assert isinstance(registry.for_action("delta", "vacuum"), DeltaProcessFactory)
    assert isinstance(registry.for_action("hudi", "compaction"), HudiProcessFactory)
    with pytest.raises(ActionNotSupported):
        registry.for_action("delta", "compaction")


def test_optimize_runs_only_when_files_were_added_since_the_last_optimize(tmp_path: Path) -> None:
    factory, table = DeltaProcessFactory(), spec("delta", {"optimize": {"min-new-files": 2}})
    delta_commit(tmp_path, 0, "WRITE", 3)
    delta_commit(tmp_path, 1, "OPTIMIZE", 1)
    delta_commit(tmp_path, 2, "WRITE", 1)
    assert factory.trigger(table, "optimize", context(tmp_path)) is None
    delta_commit(tmp_path, 3, "WRITE", 1)
    job = factory.trigger(table, "optimize", context(tmp_path))
    assert job is not None
    assert job.options["table-location"] == f"{tmp_path}/ns/t"
    assert job.catalog["properties"]["tablemgmt.table-format"] == "delta"


def test_vacuum_first_run_and_a_changed_retain_are_dry_runs(tmp_path: Path) -> None:
    factory = DeltaProcessFactory()
    (tmp_path / "ns/t/_delta_log").mkdir(parents=True)  # a Delta table is there (else the run is declined)
    first = factory.trigger(spec("delta", {"vacuum": {"retain": "2d"}}), "vacuum", context(tmp_path))
    assert first is not None and "first run of vacuum" in first.options["dry-run-reason"]
    last = Process(
        1, "lake.ns.t", "vacuum", NOW, ProcessStatus.SUCCESS, parameters={"options": first.options}
    )
    same = factory.trigger(spec("delta", {"vacuum": {"retain": "2d"}}), "vacuum", context(tmp_path, last))
    assert same is not None and "dry-run-reason" not in same.options
    changed = factory.trigger(spec("delta", {"vacuum": {"retain": "3d"}}), "vacuum", context(tmp_path, last))
    assert changed is not None and "retain changed from 2d to 3d" in changed.options["dry-run-reason"]
    confirmed = factory.trigger(spec("delta", {"vacuum": {"confirm": True}}), "vacuum", context(tmp_path))
    assert confirmed is not None and "dry-run-reason" not in confirmed.options


def test_compaction_waits_for_delta_commits_and_executes_a_pending_instant_first(tmp_path: Path) -> None:
    factory, table = HudiProcessFactory(), spec("hudi", {"compaction": {"min-delta-commits": 2}})
    hudi_timeline(tmp_path, ["20261125100000000_20261125100001000.deltacommit"])
    assert factory.trigger(table, "compaction", context(tmp_path)) is None
    (tmp_path / "ns/t/.hoodie/timeline/20261125100100000_20261125100101000.deltacommit").write_text("")
    job = factory.trigger(table, "compaction", context(tmp_path))
    assert job is not None and "compaction-instant" not in job.options
    (tmp_path / "ns/t/.hoodie/timeline/20261125100200000.compaction.requested").write_text("")
    job = factory.trigger(table, "compaction", context(tmp_path))
    assert job is not None and job.options["compaction-instant"] == "20261125100200000"


def test_a_retry_executes_the_instant_recorded_on_the_process(tmp_path: Path) -> None:
    factory, table = HudiProcessFactory(), spec("hudi", {"compaction": {}})
    hudi_timeline(
        tmp_path, ["20261125100200000.compaction.requested", "20261125100300000.compaction.requested"]
    )
    recorded = Process(
        3,
        "lake.ns.t",
        "compaction",
        NOW,
        ProcessStatus.RUNNING,
        parameters={"options": {"compaction-instant": "20261125100300000"}},
    )
    assert (
        factory.recover(table, recorded, context(tmp_path)).options["compaction-instant"]
        == "20261125100300000"
    )
    unrecorded = Process(4, "lake.ns.t", "compaction", NOW, ProcessStatus.RUNNING)
    assert (
        factory.recover(table, unrecorded, context(tmp_path)).options["compaction-instant"]
        == "20261125100200000"
    )


def test_clean_is_skipped_when_nothing_was_committed_since_the_last_clean(tmp_path: Path) -> None:
    factory, table = HudiProcessFactory(), spec("hudi", {"clean": {}})
    hudi_timeline(
        tmp_path,
        ["20261125100000000_20261125100001000.deltacommit", "20261125100100000_20261125100101000.clean"],
    )
    assert factory.trigger(table, "clean", context(tmp_path)) is None


def test_archive_runs_only_when_the_active_timeline_holds_more_than_max_commits(tmp_path: Path) -> None:
    factory = HudiProcessFactory()
    table = spec("hudi", {"archive": {"min-commits": 5, "max-commits": 6, "retain-commits": 2}})
    names = [f"2026112510{m:02d}00000_2026112510{m:02d}01000.deltacommit" for m in range(6)]
    hudi_timeline(tmp_path, [*names, "20261125100600000_20261125100601000.clean"])
    assert factory.trigger(table, "archive", context(tmp_path)) is None  # 6 commits: a clean is no commit
    (tmp_path / "ns/t/.hoodie/timeline/20261125100700000_20261125100701000.commit").write_text("")
    job = factory.trigger(table, "archive", context(tmp_path))
    assert job is not None and job.options["max-commits"] == 6 and job.options["min-commits"] == 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min-commits": 3, "max-commits": 4, "retain-commits": 2}, "min-commits\t3 is below the floor of 5"),
        ({"min-commits": 20, "max-commits": 20}, "max-commits\t20 must be greater than min-commits (20)"),
        ({"min-commits": 10, "retain-commits": 10}, "retain-commits\t10 must be less than min-commits (10)"),
    ],
)
def test_archive_settings_name_the_field_the_value_and_the_rule(options: dict, message: str) -> None:
    from airflow_tablemgmt.core.errors import InvalidDeclaration

    with pytest.raises((ValueError, InvalidDeclaration), match=re.escape(f"archive.{message}")):
        spec("hudi", {"archive": options})
    below = spec(
        "hudi",
        {"archive": {"min-commits": 3, "max-commits": 4, "retain-commits": 2, "allow-below-floor": True}},
    )
    assert below.action_settings("archive").below_floor() == ["min-commits 3 is below the floor of 5"]


def test_a_dag_per_table_and_action_for_every_format() -> None:
    """The DAG factory builds Delta and Hudi tables' DAGs as it builds Iceberg's: it never names a format."""
    from airflow_tablemgmt.dag_factory.build import build_dags

    catalog = CatalogSpec(name="lake", type="hadoop", warehouse="/w", properties={})
    tables = [
        spec("delta", {"optimize": {"zorder-by": ["v"]}, "vacuum": {"retain": "7d"}}),
        TableSpec(
            catalog="lake", namespace="ns", name="h", format="hudi", actions={"compaction": {}, "clean": {}}
        ),
    ]
    res = build_dags(tables, load_factories(), catalogs={"lake": catalog})
    assert not res.errors, res.errors
    dags = dict(res.dags)
    assert set(dags) == {
        "tms__lake.ns.t__optimize",
        "tms__lake.ns.t__vacuum",
        "tms__lake.ns.h__compaction",
        "tms__lake.ns.h__clean",
    }
    assert "delta" in dags["tms__lake.ns.t__vacuum"].tags and "hudi" in dags["tms__lake.ns.h__clean"].tags
