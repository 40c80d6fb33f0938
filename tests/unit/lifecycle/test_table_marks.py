"""Issue 36, item 4: recovery reads which attempt committed from the table's own metadata (no Spark):
an Iceberg snapshot summary's ``tablemgmt.*`` entries, a Delta commit's ``userMetadata``. The files are
written as the formats' specs lay them out (the job's side is proven with real Spark in
tests/faults/test_split_home.py)."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.lifecycle.table_marks import committed_in_table
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS


def _now_ms() -> int:
    """Now, when the test runs (not when the module was collected, which may be many minutes earlier)."""
    return int(time.time() * 1000)


def _process(attempt: int = 2, pid: int = 7, created_ago: timedelta = timedelta(minutes=5)) -> Process:
    return Process(
        id=pid,
        table_id="lake.db.t",
        action="rewrite-files",
        instant=datetime(2026, 1, 1, tzinfo=UTC),
        status=ProcessStatus.PENDING,
        attempt=attempt,
        created_at=datetime.now(UTC) - created_ago,
    )


def _iceberg(
    tmp_path: Path, summary: dict[str, str], ts_ms: int | None = None
) -> tuple[TableSpec, CatalogSpec]:
    ts_ms = _now_ms() if ts_ms is None else ts_ms
    meta = tmp_path / "wh" / "db" / "t" / "metadata"
    meta.mkdir(parents=True)
    doc = {
        "format-version": 2,
        "table-uuid": "0e0c0a0b-0000-4000-8000-000000000000",
        "location": str(meta.parent),
        "current-snapshot-id": 42,
        "snapshots": [
            {"snapshot-id": 41, "timestamp-ms": ts_ms - 1000, "summary": {"operation": "append"}},
            {
                "snapshot-id": 42,
                "parent-snapshot-id": 41,
                "timestamp-ms": ts_ms,
                "summary": {"operation": "replace", **summary},
            },
        ],
    }
    (meta / "v3.metadata.json").write_text(json.dumps(doc))
    (meta / "version-hint.text").write_text("3")
    table = TableSpec(catalog="lake", namespace="db", name="t", actions={"rewrite-files": {}})
    return table, CatalogSpec(name="lake", warehouse=str(tmp_path / "wh"))


MARK = {PROCESS: "7", ATTEMPT: "1", ACTION: "rewrite-files"}


def test_an_earlier_attempt_s_iceberg_commit_is_found(tmp_path: Path) -> None:
    table, catalog = _iceberg(tmp_path, MARK)
    found = committed_in_table(table, catalog, _process())
    assert found is not None and found["attempt"] == 1 and found["snapshot_id"] == 42
    assert found["summary"]["recorded_from_table"] is True


def test_only_this_process_s_earlier_attempts_count(tmp_path: Path) -> None:
    table, catalog = _iceberg(tmp_path, MARK)
    assert committed_in_table(table, catalog, _process(attempt=1)) is None  # its own attempt: not "earlier"
    assert committed_in_table(table, catalog, _process(pid=8)) is None  # another process
    # Committed before this row existed: the same id in another store
    assert committed_in_table(table, catalog, _process(created_ago=timedelta(seconds=-60))) is None


def test_an_unmarked_or_unreadable_table_is_no_answer(tmp_path: Path) -> None:
    table, catalog = _iceberg(tmp_path, {})
    assert committed_in_table(table, catalog, _process()) is None
    missing = CatalogSpec(name="lake", warehouse=str(tmp_path / "nowhere"))
    assert committed_in_table(table, missing, _process()) is None


def test_a_delta_commit_s_user_metadata_is_found(tmp_path: Path) -> None:
    log = tmp_path / "wh" / "db" / "t" / "_delta_log"
    log.mkdir(parents=True)
    lines = [
        {"commitInfo": {"timestamp": _now_ms(), "operation": "OPTIMIZE", "userMetadata": json.dumps(MARK)}},
        {"add": {"path": "part-0.parquet"}},
    ]
    (log / "00000000000000000003.json").write_text("\n".join(json.dumps(x) for x in lines))
    table = TableSpec(catalog="lake", namespace="db", name="t", format="delta", actions={"optimize": {}})
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "wh"))
    found = committed_in_table(table, catalog, _process())
    assert found is not None and found["attempt"] == 1 and found["summary"]["committed_commit"] == 3


def test_a_pyiceberg_summary_gives_its_properties_not_pydantics_field_pairs() -> None:
    """The object-store path reads snapshots through pyiceberg, whose ``Summary`` iterates as pydantic's
    ``(field, value)`` pairs: the mark must come from its properties."""
    from pyiceberg.table.snapshots import Operation, Summary

    from airflow_tablemgmt.formats.iceberg.marks import summary_properties

    summary = Summary(Operation.REPLACE, **MARK, **{"added-data-files": "1"})
    assert summary_properties(summary) == {"operation": "replace", **MARK, "added-data-files": "1"}
    assert summary_properties(None) == {}


# -- Hudi: a compaction's commit carries its plan's extra metadata (Avro in Hudi 1.x, JSON in 0.x) --------

#: The part of Hudi's ``HoodieCommitMetadata`` Avro schema recovery walks through (a named record used twice,
#: unions, a map of arrays), as Hudi 1.0's ``DataFileWriter`` writes it into the header.
HUDI_SCHEMA = {
    "type": "record",
    "name": "HoodieCommitMetadata",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {
            "name": "partitionToWriteStats",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": "HoodieWriteStat",
                            "fields": [
                                {"name": "fileId", "type": ["null", "string"]},
                                {"name": "numWrites", "type": ["null", "long"]},
                            ],
                        },
                    },
                },
            ],
        },
        {"name": "compacted", "type": ["null", "boolean"]},
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": ["null", "string"]}]},
        {"name": "last", "type": ["null", "HoodieWriteStat"]},
        {"name": "version", "type": ["int", "null"]},
    ],
}


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _str(s: str) -> bytes:
    return _zigzag(len(s.encode())) + s.encode()


def _hudi_avro(extra: dict[str, str]) -> bytes:
    """An Avro container file of one HoodieCommitMetadata record, laid out as Avro's spec says."""
    stat = lambda fid, n: _zigzag(1) + _str(fid) + _zigzag(1) + _zigzag(n)  # noqa: E731
    record = (
        _zigzag(1) + _zigzag(1) + _str("part=0") + _zigzag(2) + stat("f1", 300) + stat("f2", -7) + _zigzag(0)
    )
    record += _zigzag(0)  # the partition map ends
    record += _zigzag(1) + b"\x01"  # compacted: true
    record += _zigzag(1) + _zigzag(-len(extra)) + _zigzag(99)  # a block with its byte size (negative count)
    record += b"".join(_str(k) + _zigzag(1) + _str(v) for k, v in extra.items()) + _zigzag(0)
    record += _zigzag(1) + stat("f3", 1) + _zigzag(0) + _zigzag(1)
    sync = bytes(range(16))
    header = b"Obj\x01" + _zigzag(1) + _str("avro.schema") + _str(json.dumps(HUDI_SCHEMA)) + _zigzag(0) + sync
    return header + _zigzag(1) + _zigzag(len(record)) + record + sync


def _instant(dt: datetime) -> str:
    return dt.astimezone().strftime("%Y%m%d%H%M%S%f")[:17]  # Hudi's default zone: the host's local time


def _hudi(tmp_path: Path, extra: dict[str, str], *, legacy: bool = False) -> tuple[TableSpec, CatalogSpec]:
    root = tmp_path / "wh" / "db" / "t" / ".hoodie"
    timeline = root if legacy else root / "timeline"
    timeline.mkdir(parents=True)
    now = datetime.now(UTC)
    older, newer = _instant(now - timedelta(seconds=30)), _instant(now)
    (timeline / f"{older}.deltacommit").write_bytes(b"{}")  # a writer's commit: no mark
    (timeline / f"{_instant(now + timedelta(seconds=1))}.compaction.requested").write_bytes(b"")  # pending
    if legacy:
        (timeline / f"{newer}.commit").write_text(json.dumps({"compacted": True, "extraMetadata": extra}))
    else:
        (timeline / f"{older}_{newer}.commit").write_bytes(_hudi_avro(extra))
    table = TableSpec(catalog="lake", namespace="db", name="t", format="hudi", actions={"compaction": {}})
    return table, CatalogSpec(name="lake", warehouse=str(tmp_path / "wh"))


HUDI_MARK = {PROCESS: "7", ATTEMPT: "1", ACTION: "compaction"}


def _hudi_process(**kw: object) -> Process:
    return dataclasses.replace(_process(**kw), action="compaction")  # type: ignore[arg-type]


def test_a_hudi_compaction_commit_s_extra_metadata_is_found_in_its_avro_commit(tmp_path: Path) -> None:
    table, catalog = _hudi(tmp_path, {"schema": "{}", **HUDI_MARK})
    found = committed_in_table(table, catalog, _hudi_process())
    assert found is not None and found["attempt"] == 1 and found["snapshot_id"] is None
    assert found["summary"]["recorded_from_table"] is True
    assert committed_in_table(table, catalog, _hudi_process(pid=8)) is None
    assert committed_in_table(table, catalog, _hudi_process(attempt=1)) is None


def test_a_hudi_0x_json_commit_and_an_unmarked_commit(tmp_path: Path) -> None:
    table, catalog = _hudi(tmp_path / "a", HUDI_MARK, legacy=True)
    assert (committed_in_table(table, catalog, _hudi_process()) or {}).get("attempt") == 1
    table, catalog = _hudi(tmp_path / "b", {"schema": "{}"})
    assert committed_in_table(table, catalog, _hudi_process()) is None


def test_the_avro_reader_reads_deflate_blocks_and_refuses_what_it_does_not_know() -> None:
    import zlib

    import pytest

    from airflow_tablemgmt.metadata.avro_file import AvroError, records

    plain = _hudi_avro(HUDI_MARK)
    assert records(plain)[0]["extraMetadata"] == HUDI_MARK
    assert records(plain)[0]["partitionToWriteStats"]["part=0"][1] == {"fileId": "f2", "numWrites": -7}
    assert records(plain)[0]["last"] == {"fileId": "f3", "numWrites": 1}
    sync = plain[-16:]
    head = plain.index(sync) + 16
    body = plain[head:-16]
    count_len = 1
    record = body[count_len:]
    size_len = len(_zigzag(len(record) - len(_zigzag(len(record)))))
    raw = record[size_len:]
    squeezed = zlib.compressobj(wbits=-15)
    packed = squeezed.compress(raw) + squeezed.flush()
    meta = (
        _zigzag(2)
        + _str("avro.schema")
        + _str(json.dumps(HUDI_SCHEMA))
        + _str("avro.codec")
        + _str("deflate")
    )
    deflated = b"Obj\x01" + meta + _zigzag(0) + sync + _zigzag(1) + _zigzag(len(packed)) + packed + sync
    assert records(deflated)[0]["extraMetadata"] == HUDI_MARK
    with pytest.raises(AvroError, match="magic"):
        records(b"{}")
    with pytest.raises(AvroError, match="sync marker"):
        records(plain[:-1] + b"\xff")


# -- a plugin format: its factory's commit_marks ------------------------------------------------------------


def test_a_plugin_format_s_marks_come_from_its_factory(tmp_path: Path, monkeypatch: object) -> None:
    from airflow_tablemgmt.factories import discovery
    from airflow_tablemgmt.spark.job.commit_mark import commit_user_prefix

    class Factory:
        name = "fmt"

        def supported_actions(self) -> dict[str, set[str]]:
            return {"fmt": {"compact"}}

        def commit_marks(self, table: TableSpec, catalog: CatalogSpec) -> list[tuple[str, int, int]]:
            user = f"{commit_user_prefix({PROCESS: '7', ATTEMPT: '1', ACTION: 'compact'})}_uuid"
            return [("someone-else", 3, _now_ms()), (user, 2, _now_ms()), ("", 1, _now_ms())]

    registry = discovery.FactoryRegistry()
    registry.add(Factory())  # type: ignore[arg-type]
    monkeypatch.setattr(discovery, "factories_for", lambda fmt, action: registry)  # type: ignore[attr-defined]
    table = TableSpec.model_construct(catalog="lake", namespace="db", name="t", format="fmt", actions={})
    process = dataclasses.replace(_process(), action="compact")
    found = committed_in_table(table, CatalogSpec(name="lake", warehouse=str(tmp_path)), process)
    assert found is not None and found["attempt"] == 1 and found["summary"]["committed_commit"] == 2


def test_the_job_s_mark_is_current_only_while_it_runs() -> None:
    from types import SimpleNamespace

    from airflow_tablemgmt.formats.delta import job as delta_job
    from airflow_tablemgmt.spark.job import commit_mark

    class Conf:
        def __init__(self) -> None:
            self.values: dict[str, str] = {}

        def set(self, k: str, v: str) -> None:
            self.values[k] = v

        def unset(self, k: str) -> None:
            self.values.pop(k, None)

    spark = SimpleNamespace(conf=Conf())
    job = SimpleNamespace(process_id=7, attempt=2, action="compaction")
    assert commit_mark.current() is None
    commit_mark.apply(spark, job, remote=True, module=delta_job)  # type: ignore[arg-type]
    assert commit_mark.current() == {PROCESS: "7", ATTEMPT: "2", ACTION: "compaction"}
    assert commit_mark.entries() == commit_mark.current()
    assert commit_mark.commit_user_prefix() == "tablemgmt.7.2.compaction"
    assert json.loads(spark.conf.values[delta_job.USER_METADATA]) == commit_mark.current()
    commit_mark.clear(spark, job, remote=True, module=delta_job)  # type: ignore[arg-type]
    assert delta_job.USER_METADATA not in spark.conf.values
    assert commit_mark.current() is None and commit_mark.commit_user_prefix() is None
    assert commit_mark.parse_text("tablemgmt.7.2.compaction_0f8fad5b") == {
        PROCESS: "7",
        ATTEMPT: "2",
        ACTION: "compaction",
    }
    assert (
        commit_mark.parse_text("tablemgmt.x.2.compaction") is None and commit_mark.parse_text("[1]") is None
    )
