"""The shared change poller: one check per catalog and tick for all its watched tables, watchers woken only
when their table's token moves, full reads only then. Synthetic hadoop tables on local disk (a metadata
JSON per version and ``version-hint.text``, replaced by a rename the way Iceberg's HadoopTableOperations
commits), a SQLite JDBC catalog's ``iceberg_tables`` rows, and fake token sources; no JVM."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import pytest
from airflow.triggers.base import TriggerEvent

import airflow_tablemgmt.triggers.change_poller as change_poller
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader, SnapshotState
from airflow_tablemgmt.triggers.change_check import (
    MISSING,
    JdbcListingTokens,
    LocalHadoopTokens,
    PerTableTokens,
    token_source,
)
from airflow_tablemgmt.triggers.change_poller import ChangePoller, poller_for, running_pollers
from airflow_tablemgmt.triggers.snapshot import TableSnapshotTrigger

WAIT = 10.0


def catalog(warehouse: Path) -> CatalogSpec:
    return CatalogSpec(name="lake", type="hadoop", warehouse=str(warehouse), properties={})


def catalog_json(warehouse: Path) -> dict[str, Any]:
    return catalog(warehouse).model_dump(mode="json", by_alias=True)


def commit(warehouse: Path, name: str, operation: str = "append") -> int:
    """One commit of a synthetic hadoop table: the next ``v<N>.metadata.json``, then the hint by rename."""
    meta = warehouse / "db" / name / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    hint = meta / "version-hint.text"
    version = int(hint.read_text()) if hint.exists() else 0
    previous = json.loads((meta / f"v{version}.metadata.json").read_text()) if version else {"snapshots": []}
    sid = random.getrandbits(62)
    snap = {"snapshot-id": sid, "summary": {"operation": operation}}
    if previous.get("current-snapshot-id"):
        snap["parent-snapshot-id"] = previous["current-snapshot-id"]
    doc = {"current-snapshot-id": sid, "snapshots": [*previous["snapshots"], snap]}
    (meta / f"v{version + 1}.metadata.json").write_text(json.dumps(doc))
    tmp = meta / "version-hint.text.tmp"
    tmp.write_text(str(version + 1))
    tmp.replace(hint)
    return sid


class CountingReader(SnapshotReader):
    """A real reader that counts full reads per table."""

    def __init__(self, spec: CatalogSpec) -> None:
        super().__init__(spec)
        self.reads: dict[str, int] = {}

    def current_state(self, table: TableIdentifier) -> SnapshotState:
        self.reads[table.name] = self.reads.get(table.name, 0) + 1
        return super().current_state(table)


async def until(condition: Any, timeout: float = WAIT) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


def watcher(warehouse: Path, name: str, reader: SnapshotReader, poll: float = 0.05) -> TableSnapshotTrigger:
    trigger = TableSnapshotTrigger(
        table_id=f"lake.db.{name}", catalog=catalog_json(warehouse), poll_interval=poll
    )
    trigger._reader = reader
    return trigger


def test_local_hadoop_tokens_move_on_a_commit_only(tmp_path: Path) -> None:
    commit(tmp_path, "t")
    source = token_source(SnapshotReader(catalog(tmp_path)))
    assert isinstance(source, LocalHadoopTokens) and source.batched
    t, absent = TableIdentifier("lake", "db", "t"), TableIdentifier("lake", "db", "absent")
    pt, pa = source.probe(t), source.probe(absent)
    first, missing = source.tokens([pt, pa])
    assert missing == MISSING
    assert source.tokens([pt]) == [first]  # nothing committed: the same token
    commit(tmp_path, "t")
    [second] = source.tokens([pt])
    assert second != first
    (tmp_path / "db" / "t" / "metadata" / "version-hint.text").unlink()  # no hint: the directory decides
    [listed] = source.tokens([pt])
    assert listed not in (second, MISSING)
    commit(tmp_path, "absent")
    assert source.tokens([pa]) != [MISSING]  # a table that appears moves too


def test_other_catalogs_get_a_per_table_check(tmp_path: Path) -> None:
    rest = CatalogSpec(name="r", type="rest", properties={"uri": "http://127.0.0.1:1"})
    assert isinstance(token_source(SnapshotReader(rest)), PerTableTokens)
    remote = CatalogSpec(name="s", type="hadoop", warehouse="s3://bucket/wh", properties={})
    assert not token_source(SnapshotReader(remote)).batched


def test_a_jdbc_catalog_is_checked_with_one_listing(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy import text

    db = tmp_path / "catalog.db"
    SqlCatalog("jc", uri=f"sqlite:///{db}", warehouse=f"file://{tmp_path}")  # creates iceberg_tables
    spec = CatalogSpec(
        name="jc", type="jdbc", warehouse=str(tmp_path), properties={"uri": f"jdbc:sqlite:{db}"}
    )
    source = token_source(SnapshotReader(spec))
    assert isinstance(source, JdbcListingTokens) and source.batched
    engine = source.reader.catalog_client().engine  # type: ignore[attr-defined]

    def row(sql: str) -> None:
        with engine.begin() as conn:
            conn.execute(text(sql))

    columns = "(catalog_name, table_namespace, table_name, metadata_location)"
    row(f"INSERT INTO iceberg_tables {columns} VALUES ('jc', 'db', 'a', 'file:///a/v1.metadata.json')")
    row(f"INSERT INTO iceberg_tables {columns} VALUES ('other', 'db', 'b', 'file:///b/v1.metadata.json')")
    a, b = TableIdentifier("jc", "db", "a"), TableIdentifier("jc", "db", "b")
    probes = [source.probe(a), source.probe(b)]
    assert source.tokens(probes) == ["file:///a/v1.metadata.json", MISSING]  # b is another catalog's
    row("UPDATE iceberg_tables SET metadata_location = 'file:///a/v2.metadata.json' WHERE table_name = 'a'")
    assert source.tokens(probes[:1]) == ["file:///a/v2.metadata.json"]


def test_a_watcher_fires_on_a_commit_and_reads_its_table_only_when_the_check_moves(tmp_path: Path) -> None:
    """Between commits the shared check runs every poll, and the watcher does not read its table at all
    (each poll was a full read before)."""
    commit(tmp_path, "t")
    reader = CountingReader(catalog(tmp_path))
    trigger = watcher(tmp_path, "t", reader)

    async def scenario() -> tuple[TriggerEvent, int, int]:
        events = trigger.run()
        waiting = asyncio.ensure_future(anext(events))
        await until(lambda: trigger._subscription is not None)
        poller = trigger._subscription.poller  # type: ignore[union-attr]
        table = TableIdentifier("lake", "db", "t")
        await until(lambda: poller.checks_of(table) >= 3)
        reads = reader.reads["t"]
        await until(lambda: poller.checks_of(table) >= 20)  # ≈ 1 s of polls, nothing committed
        idle_reads = reader.reads["t"] - reads
        assert not waiting.done()
        new = commit(tmp_path, "t")
        event = await asyncio.wait_for(waiting, WAIT)
        await events.aclose()
        return event, new, idle_reads

    event, new, idle_reads = asyncio.run(scenario())
    assert event.payload["snapshot_id"] == new
    assert idle_reads == 0


def test_watchers_of_one_catalog_share_one_poll_and_only_the_committed_table_is_read(
    tmp_path: Path,
) -> None:
    names = [f"t{i}" for i in range(200)]
    for name in names:
        commit(tmp_path, name)
    reader = CountingReader(catalog(tmp_path))
    triggers = [watcher(tmp_path, name, reader) for name in names]

    async def scenario() -> tuple[TriggerEvent, int, dict[str, int], int, int]:
        streams = [t.run() for t in triggers]
        waiting = [asyncio.ensure_future(anext(s)) for s in streams]
        await until(lambda: all(t._subscription is not None for t in triggers))
        [poller] = running_pollers()  # one loop for the 200 watchers of the catalog
        await until(
            lambda: poller.tables == 200 and min(poller.checks_of(f"lake.db.{n}") for n in names) >= 3
        )
        before = dict(reader.reads)
        ticks = poller.ticks
        new = commit(tmp_path, "t7")
        done, _ = await asyncio.wait(waiting, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
        [first] = done
        for w in waiting:
            w.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        for s in streams:
            await s.aclose()
        reads = {n: reader.reads[n] - before[n] for n in names}
        return first.result(), new, reads, poller.ticks - ticks, len(running_pollers())

    event, new, reads, ticks, pollers_left = asyncio.run(scenario())
    assert event.payload["table"] == "lake.db.t7" and event.payload["snapshot_id"] == new
    assert reads["t7"] >= 1
    assert sum(reads.values()) - reads["t7"] == 0  # no other table was read
    assert ticks >= 1
    assert pollers_left == 0  # the loop ends with its last watcher


class FakeSource:
    def __init__(self, batched: bool = True) -> None:
        self.batched = batched
        self.values: dict[TableIdentifier, Hashable] = {}
        self.calls: list[list[TableIdentifier]] = []
        self.fail: Exception | None = None

    def probe(self, table: TableIdentifier) -> TableIdentifier:
        return table

    def tokens(self, probes: Sequence[Any]) -> list[Hashable]:
        self.calls.append(list(probes))
        if self.fail is not None:
            raise self.fail
        return [self.values.get(t, 0) for t in probes]


def table(i: int) -> TableIdentifier:
    return TableIdentifier("lake", "db", f"t{i}")


def test_a_change_between_a_read_and_the_wait_is_not_lost() -> None:
    source = FakeSource()

    async def scenario() -> bool:
        poller = ChangePoller("k", 0.01, lambda: source)
        sub = poller.subscribe(table(0))
        await until(lambda: sub.generation >= 1)  # the first check moves it
        seen = sub.generation  # taken before the watcher's read ...
        source.values[table(0)] = 1  # ... a commit lands while it reads ...
        await until(lambda: sub.generation > seen)
        woke = await sub.wait(seen, timeout=5.0)  # ... and the wait returns at once
        sub.close()
        return woke

    assert asyncio.run(scenario()) is True


def test_a_per_table_catalog_is_checked_in_bounded_slices_round_robin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__WATCHER_CATALOG_CALLS_PER_SECOND", "100")
    source = FakeSource(batched=False)

    async def scenario() -> ChangePoller:
        poller = ChangePoller("k", 0.05, lambda: source)  # at most 5 calls per tick
        subs = [poller.subscribe(table(i)) for i in range(12)]
        await until(lambda: min(poller.checks_of(table(i)) for i in range(12)) >= 2)
        assert poller.calls_per_second == 100.0
        for sub in subs:
            sub.close()
        return poller

    asyncio.run(scenario())
    per_tick = [len(call) for call in source.calls]
    assert max(per_tick) <= 5  # one tick's slice, spread over the worker threads
    assert {t for call in source.calls for t in call} == {table(i) for i in range(12)}


def test_a_bad_calls_per_second_setting_is_named_and_the_default_applies(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__WATCHER_CATALOG_CALLS_PER_SECOND", "0")
    assert change_poller.calls_per_second() == change_poller.PER_TABLE_CALLS_PER_SECOND
    assert "watcher_catalog_calls_per_second: 0.0 is not allowed (a number > 0)" in caplog.text


def test_a_failed_check_wakes_every_watcher_to_read_for_itself() -> None:
    source = FakeSource()

    async def scenario() -> list[bool]:
        poller = ChangePoller("k", 0.01, lambda: source)
        subs = [poller.subscribe(table(i)) for i in range(3)]
        await until(lambda: all(s.generation >= 1 for s in subs))
        seen = [s.generation for s in subs]
        source.fail = OSError("catalog unreachable")
        woke = await asyncio.gather(*(s.wait(g, timeout=5.0) for s, g in zip(subs, seen, strict=True)))
        for s in subs:
            s.close()
        return list(woke)

    assert asyncio.run(scenario()) == [True, True, True]


def test_pollers_are_per_catalog_and_interval(tmp_path: Path) -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        cat = catalog_json(tmp_path)
        a = poller_for(cat, 1.0, lambda: None)
        return (
            a is poller_for(cat, 1.0, lambda: None),
            a is not poller_for(cat, 2.0, lambda: None),
            a is not poller_for({**cat, "name": "other"}, 1.0, lambda: None),
        )

    assert asyncio.run(scenario()) == (True, True, True)
