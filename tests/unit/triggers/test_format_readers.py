"""The watchers of Hudi and Delta tables: the generic snapshot trigger polls a Hudi timeline and a Delta
log through the reader its catalog's format names (``triggers/format_readers.py``), fires on a writer's
commit and not on the maintenance commits it triggered; the health figures read from the same files.
Timelines and logs are laid out on disk as Hudi 1.x and Delta write them; no JVM."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from airflow.triggers.base import TriggerEvent

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.formats.delta.metadata import delta_health
from airflow_tablemgmt.formats.delta.reader import DeltaLogReader
from airflow_tablemgmt.formats.hudi.metadata import hudi_health
from airflow_tablemgmt.formats.hudi.reader import HudiTimelineReader
from airflow_tablemgmt.metadata.iceberg import SnapshotReader
from airflow_tablemgmt.triggers.format_readers import reader_for, watched_catalog
from airflow_tablemgmt.triggers.snapshot import TableSnapshotTrigger

TABLE = "lake.ns.t"


def catalog(warehouse: Path) -> CatalogSpec:
    return CatalogSpec(name="lake", type="hadoop", warehouse=str(warehouse), properties={})


def hudi_instant(root: Path, instant: str, action: str, requested_as: str | None = None) -> None:
    timeline = root / "ns" / "t" / ".hoodie" / "timeline"
    timeline.mkdir(parents=True, exist_ok=True)
    props = root / "ns" / "t" / ".hoodie" / "hoodie.properties"
    if not props.exists():
        props.write_text("hoodie.table.type=MERGE_ON_READ\n")
    (timeline / f"{instant}.{requested_as or action}.requested").write_text("")
    (timeline / f"{instant}_{int(instant) + 1000}.{action}").write_text("")


def delta_commit(root: Path, version: int, operation: str, data_change: bool) -> None:
    log = root / "ns" / "t" / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [
        {"commitInfo": {"operation": operation}},
        {"add": {"path": f"f{version}.parquet", "size": 10 << 20, "dataChange": data_change}},
    ]
    (log / f"{version:020d}.json").write_text("\n".join(map(json.dumps, lines)))


async def events_while(trigger: TableSnapshotTrigger, steps: list[Any]) -> list[dict[str, Any]]:
    """Run the trigger; after each poll interval apply the next step; the events it emitted."""
    out: list[dict[str, Any]] = []
    gen = trigger.run()

    async def collect() -> None:
        async for event in gen:
            assert isinstance(event, TriggerEvent)
            out.append(event.payload)

    task = asyncio.create_task(collect())
    for apply in steps:
        await asyncio.sleep(0.3)
        apply()
    await asyncio.sleep(0.3)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return out


def test_the_watcher_fires_on_a_hudi_writers_commit_not_on_compaction_or_clustering(tmp_path: Path) -> None:
    hudi_instant(tmp_path, "20261125100000000", "deltacommit")
    marked = watched_catalog(catalog(tmp_path), "hudi")
    trigger = TableSnapshotTrigger(table_id=TABLE, catalog=marked, poll_interval=0.05, data_changes_only=True)
    events = asyncio.run(
        events_while(
            trigger,
            [
                lambda: hudi_instant(tmp_path, "20261125100100000", "deltacommit"),
                lambda: hudi_instant(tmp_path, "20261125100200000", "commit", requested_as="compaction"),
                lambda: hudi_instant(
                    tmp_path, "20261125100300000", "replacecommit", requested_as="clustering"
                ),
                lambda: hudi_instant(tmp_path, "20261125100400000", "deltacommit"),
            ],
        )
    )
    assert [(e["snapshot_id"], e["previous_snapshot_id"]) for e in events] == [
        (20261125100100000, 20261125100000000),
        (20261125100400000, 20261125100300000),
    ]
    assert isinstance(trigger.reader, HudiTimelineReader)


def test_the_watcher_fires_on_a_delta_write_not_on_optimize(tmp_path: Path) -> None:
    delta_commit(tmp_path, 0, "WRITE", True)
    trigger = TableSnapshotTrigger(
        table_id=TABLE,
        catalog=watched_catalog(catalog(tmp_path), "delta"),
        poll_interval=0.05,
        data_changes_only=True,
    )
    events = asyncio.run(
        events_while(
            trigger,
            [
                lambda: delta_commit(tmp_path, 1, "WRITE", True),
                lambda: delta_commit(tmp_path, 2, "OPTIMIZE", False),
                lambda: delta_commit(tmp_path, 3, "MERGE", True),
            ],
        )
    )
    assert [(e["snapshot_id"], e["previous_snapshot_id"]) for e in events] == [(1, 0), (3, 2)]
    assert isinstance(trigger.reader, DeltaLogReader)


def test_an_iceberg_catalog_is_left_as_it_is_and_read_by_icebergs_reader(tmp_path: Path) -> None:
    plain = catalog(tmp_path)
    assert watched_catalog(plain, "iceberg") is plain
    assert isinstance(reader_for(plain), SnapshotReader)
    marked = watched_catalog(plain, "hudi")
    assert marked.properties == {"tablemgmt.table-format": "hudi"} and plain.properties == {}


def test_the_readers_cache_by_pointer_and_the_gate_question(tmp_path: Path) -> None:
    hudi_instant(tmp_path, "20261125100000000", "deltacommit")
    reader = HudiTimelineReader(catalog(tmp_path))
    table = TableIdentifier.parse(TABLE)
    assert reader.has_new_snapshot(table, None) == (True, 20261125100000000)
    assert reader.has_new_snapshot(table, 20261125100000000) == (False, 20261125100000000)
    assert reader.metadata_loads == 1  # the second answer came from the unchanged listing


def test_hudi_health_counts_log_files_per_file_group(tmp_path: Path) -> None:
    hudi_instant(tmp_path, "20261125100000000", "deltacommit")
    hudi_instant(tmp_path, "20261125100100000", "deltacommit")
    (tmp_path / "ns/t/.hoodie/timeline/20261125100200000.compaction.requested").write_text("")
    part = tmp_path / "ns" / "t" / "0"
    part.mkdir()
    fg = "9bbb28fa-bee5-430e-b5bd-1522fecc4d76-0"
    (part / f"{fg}_0-60-84_20261125100000000.parquet").write_text("")
    for v in (1, 2, 3):
        (part / f".{fg}_20261125100000000.log.{v}_0-111-17{v}").write_text("")
    (part / "other-0_1-60-85_20261125100000000.parquet").write_text("")
    health = hudi_health(str(tmp_path / "ns" / "t"))
    assert health["pending_compactions"] == 1 and health["delta_commits_since_compaction"] == 2
    assert (health["file_groups"], health["base_files"], health["log_files"]) == (2, 2, 3)
    assert health["max_log_files_per_file_group"] == 3 and health["file_groups_with_logs"] == 1


def test_delta_health_counts_small_files_and_the_logs_size(tmp_path: Path) -> None:
    delta_commit(tmp_path, 0, "WRITE", True)
    delta_commit(tmp_path, 1, "WRITE", True)
    health = delta_health(str(tmp_path / "ns" / "t"), small_file_bytes=20 << 20)
    assert health["data_files"] == 2 and health["small_files"] == 2
    assert health["log_commits"] == 2 and health["log_bytes"] > 0
    assert health["checkpoint_version"] is None and health["commits_since_checkpoint"] == 2
    assert delta_health(str(tmp_path / "ns" / "t"), small_file_bytes=1 << 20)["small_files"] == 0


def test_a_missing_table_is_not_found_and_an_unreachable_store_an_outage(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A table not there yet: TableNotFound; a store that cannot be read: StoreUnreachable, an OSError the
    asset watcher logs and polls again after, naming the table and the endpoint, never the secret."""
    import pytest

    from airflow_tablemgmt.core.errors import TableNotFound
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from airflow_tablemgmt.metadata.table_dir import StoreUnreachable
    from tests.support.servers import free_ports

    table = TableIdentifier.parse(TABLE)
    with pytest.raises(TableNotFound, match=r"delta table lake.ns.t: .*not a Delta table"):
        DeltaLogReader(catalog(tmp_path)).current_state(table)
    (port,) = free_ports(1)  # nothing listens there
    s3 = CatalogSpec(
        name="lake",
        type="hadoop",
        warehouse="s3a://bucket/lake",
        properties={
            "spark.hadoop.fs.s3a.endpoint": f"http://127.0.0.1:{port}",
            "spark.hadoop.fs.s3a.access.key": "env:TMS_FR_ACCESS",
            "spark.hadoop.fs.s3a.secret.key": "env:TMS_FR_SECRET",
        },
    )
    monkeypatch.setenv("TMS_FR_ACCESS", "canary-access-4d1")
    monkeypatch.setenv("TMS_FR_SECRET", "canary-secret-9b2")
    s3 = resolve_catalog_spec(s3)  # as the triggerer resolves it
    for reader in (HudiTimelineReader(s3), DeltaLogReader(s3)):
        with pytest.raises(StoreUnreachable) as caught:
            reader.current_state(table)
        text = str(caught.value)
        assert isinstance(caught.value, OSError) and "canary" not in text
        assert text.startswith(f"{reader.format} table lake.ns.t: s3a://bucket/lake/ns/t/")
        assert f"the object store at http://127.0.0.1:{port} could not be read" in text
