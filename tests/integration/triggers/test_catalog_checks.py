"""The shared poll's check on the catalogs teams run, against real servers: a JDBC catalog on PostgreSQL (one
listing of ``iceberg_tables`` per tick for all its tables) and Iceberg's reference REST catalog (the metadata
pointer, one call per table), both over S3 (SeaweedFS). Tables are written and committed to by pyiceberg;
each check's answer moves with a commit to its table only, and a watcher with its secrets as references
reports a commit through the shared poll.

The JDBC case needs no JVM (PostgreSQL and SeaweedFS); the REST case starts the reference server (Java)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader
from airflow_tablemgmt.triggers.change_check import MISSING, JdbcListingTokens, PerTableTokens, token_source
from airflow_tablemgmt.triggers.snapshot import TableSnapshotChangedTrigger, TableSnapshotTrigger
from tests.integration.catalogs.conftest import postgres_database
from tests.support.catalogs import s3_properties, seed, writer
from tests.support.servers import ACCESS_KEY, SECRET_KEY, IcebergRestServer, SeaweedS3

pytestmark = [pytest.mark.integration]

WAIT = 60.0
_REST_DATABASES: dict[str, Path] = {}  # a REST server's catalog database, by catalog name


@pytest.fixture(scope="module", autouse=True)
def _secrets() -> Iterator[None]:
    saved = {
        k: os.environ.get(k) for k in ("TMS_TEST_S3_KEY_ID", "TMS_TEST_S3_SECRET", "TMS_TEST_PG_PASSWORD")
    }
    os.environ.update(
        TMS_TEST_S3_KEY_ID=ACCESS_KEY, TMS_TEST_S3_SECRET=SECRET_KEY, TMS_TEST_PG_PASSWORD="unused"
    )
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module", params=["jdbc-s3", "rest-s3"])
def catalog(
    request: pytest.FixtureRequest, s3: SeaweedS3, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CatalogSpec]:
    if request.param == "rest-s3":
        server = IcebergRestServer(tmp_path_factory.mktemp("rest"), s3).start()
        _REST_DATABASES["restw"] = server.database
        yield CatalogSpec(
            name="restw", type=CatalogType.REST, properties={"uri": server.uri, **s3_properties(s3)}
        )
        server.stop()
        return
    with postgres_database("tms_watch") as database:
        yield CatalogSpec(
            name="jdbcw",
            type=CatalogType.JDBC,
            warehouse=f"s3://{s3.bucket}/jdbcw",
            properties={
                "uri": f"jdbc:postgresql://127.0.0.1:5432/{database}",
                "jdbc.user": "postgres",
                "jdbc.password": "env:TMS_TEST_PG_PASSWORD",
                **s3_properties(s3),
            },
        )


def append(catalog: CatalogSpec, table: TableIdentifier) -> int:
    import pyarrow as pa

    loaded = writer(catalog).load_table((*table.namespace_parts, table.name))
    loaded.append(pa.table({"id": [1], "v": ["x"]}))
    snapshot = loaded.current_snapshot()
    assert snapshot is not None
    return int(snapshot.snapshot_id)


def test_the_check_moves_with_a_commit_to_its_table_only(catalog: CatalogSpec) -> None:
    a = seed(catalog, f"a_{uuid.uuid4().hex[:6]}", appends=1)
    b = seed(catalog, f"b_{uuid.uuid4().hex[:6]}", appends=1)
    absent = TableIdentifier(catalog.name, "db", "absent")
    source = token_source(SnapshotReader(resolve_catalog_spec(catalog)))
    assert isinstance(source, JdbcListingTokens if catalog.type == CatalogType.JDBC else PerTableTokens)
    probes = [source.probe(t) for t in (a, b, absent)]
    before = source.tokens(probes)
    assert before[2] == MISSING or before[2][0] == "error"  # a table the catalog does not have
    append(catalog, a)
    after = source.tokens(probes)
    assert after[0] != before[0] and after[1] == before[1]


def test_a_watcher_reports_a_commit_through_the_shared_poll(
    catalog: CatalogSpec, capfd: pytest.CaptureFixture[str]
) -> None:
    """On the REST server, the watcher also starts during an outage of the catalog service (its database
    locked: every table load is a 500, as in a catalog's own outage) and outlives it; the sensor's trigger,
    started in the same outage, ends at its deadline with a timeout that says the catalog did not answer."""
    table = seed(catalog, f"w_{uuid.uuid4().hex[:6]}", appends=1)
    spec = catalog.model_dump(
        mode="json", by_alias=True
    )  # secrets still references: resolved in the triggerer
    trigger = TableSnapshotTrigger(
        table_id=str(table), catalog=spec, poll_interval=0.2, actions={"rewrite-files": 0}
    )
    outage = catalog.type == CatalogType.REST

    async def scenario() -> tuple[dict, int]:
        events = trigger.run()
        if outage:
            locked = sqlite3.connect(_REST_DATABASES[catalog.name], isolation_level=None)
            locked.execute("BEGIN EXCLUSIVE")
        waiting = asyncio.ensure_future(anext(events))
        if outage:
            # The sensor's trigger, during the same outage, waits it out and ends at its deadline saying so.
            sensing = TableSnapshotChangedTrigger(
                table_id=str(table), catalog=spec, poll_interval=0.2, timeout=4
            )
            ended = await asyncio.wait_for(anext(sensing.run()), WAIT)
            assert ended.payload["status"] == "timeout", ended.payload
            assert "did not answer" in ended.payload["message"], ended.payload
            await asyncio.sleep(3.0)  # the server's SQLite waits 3 s on a lock: two failed reads at least
            assert not waiting.done(), waiting.exception() or waiting.result()
            locked.execute("ROLLBACK")
            locked.close()
        deadline = time.monotonic() + WAIT
        while trigger._subscription is None or trigger._subscription.poller.checks_of(table) < 3:
            # A trigger that ended (an error from the catalog) or a poller that never checks fails here,
            # with what it raised, instead of waiting for the suite's timeout.
            assert not waiting.done(), waiting.exception() or waiting.result()
            assert time.monotonic() < deadline, (
                f"the shared poll checked {table} fewer than 3 times in {WAIT}s"
            )
            await asyncio.sleep(0.05)
        assert not waiting.done()
        new = await asyncio.to_thread(append, catalog, table)
        event = await asyncio.wait_for(waiting, WAIT)
        await events.aclose()
        return event.payload, new

    payload, new = asyncio.run(scenario())
    assert payload["table"] == str(table) and payload["snapshot_id"] == new
    if outage:  # the outage was seen (and said) as one: the catalog did not answer, the watcher retried
        out = capfd.readouterr()  # the triggers' log (Airflow's structlog) goes to the task's output
        said = [line for line in (out.out + out.err).splitlines() if "will retry" in line]
        assert any("did not answer" in m and "ServerError" in m for m in said), said
