"""The Spark Connect engine against a real server: a compaction of a real Iceberg table through
``ProcessRunner`` + ``SparkConnectJobHook`` (the process row, the figures, the rows and their checksum),
catalogs isolated per session, interrupt by tag, a refused refresh and an unreachable server."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.spark.connect.client import close_session, open_session
from airflow_tablemgmt.spark.connect.operations import recorded_operations
from airflow_tablemgmt.spark.connect.server import free_port
from airflow_tablemgmt.spark.connect.session import ConnectRun, connect_conf
from airflow_tablemgmt.store import Store
from tests.integration.connect.server import ConnectServer

pytestmark = pytest.mark.integration

FILES = 40


def small_files_table(url: str, catalog: CatalogSpec, name: str, files: int = FILES) -> str:
    """A table of ``files`` small data files, written through a Connect session of its own."""
    spark = open_session(url)
    try:
        for key, value in connect_conf(catalog).items():
            spark.conf.set(key, value)
        table = f"{catalog.name}.db.{name}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.db").collect()
        spark.sql(f"CREATE TABLE {table} (id bigint, v string) USING iceberg").collect()
        rows = spark.range(files * 100).selectExpr("id", "sha1(cast(id AS string)) AS v")
        rows.repartition(files).writeTo(table).append()
        return table
    finally:
        spark.stop()


def table_state(url: str, catalog: CatalogSpec, table: str) -> dict[str, Any]:
    spark = open_session(url)
    try:
        for key, value in connect_conf(catalog).items():
            spark.conf.set(key, value)
        files = spark.sql(f"SELECT count(*) AS n FROM {table}.files").collect()[0]["n"]
        row = spark.sql(f"SELECT count(*) AS n, sum(hash(id, v)) AS h FROM {table}").collect()[0]
        return {"files": int(files), "rows": int(row["n"]), "checksum": int(row["h"])}
    finally:
        spark.stop()


def test_compaction_runs_on_the_connect_server_and_is_recorded(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse"))
    table = small_files_table(connect_server.url, catalog, "small")
    before = table_state(connect_server.url, catalog, table)
    assert before["files"] == FILES
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    store.catalogs.upsert(catalog, Owner.STORE)
    store.tables.upsert(
        TableSpec(catalog="lake", namespace="db", name="small", actions={"rewrite-files": {}}), Owner.STORE
    )
    runner = ProcessRunner(store, default_factories(), SparkConnectJobHook(url=connect_server.url))

    outcome = runner.run(
        RunRequest(
            table_id=table,
            action="rewrite-files",
            instant=datetime(2026, 1, 1, tzinfo=UTC),
            holder="d/r/t/1",
            try_number=1,
        )
    )

    process = store.processes.get(outcome.process.id)
    assert str(process.status) == "SUCCESS", process.failure_reason
    assert str(process.external_id).startswith(f"connect:{connect_server.url}#")
    after = table_state(connect_server.url, catalog, table)
    assert after["files"] < before["files"]
    assert (after["rows"], after["checksum"]) == (before["rows"], before["checksum"])
    summary = outcome.summary
    assert summary["before"]["data_files"] == FILES
    assert summary["after"]["data_files"] == after["files"]
    assert summary["after"]["live_records"] == before["rows"]
    assert summary["rewritten_data_files_count"] == FILES
    # What the job cost, from the server's status API: the stages of the jobs tagged with this job's tag
    # (another session's jobs on the same server are not counted); it wrote exactly the new files' bytes.
    cost = summary["cost"]
    assert (cost["scope"], cost["source"]) == ("operations", "connect-rest")
    assert cost["jobs"] >= 1 and cost["tasks"] >= 1
    assert process.core_seconds is not None and process.core_seconds > 0
    assert process.bytes_read is not None and process.bytes_read >= summary["rewritten_bytes_count"]
    assert process.bytes_written == summary["after"]["data_bytes"]
    store.dispose()


def test_sessions_do_not_see_each_others_catalogs(connect_server: ConnectServer, tmp_path: Path) -> None:
    catalog = CatalogSpec(name="private", warehouse=str(tmp_path / "wh"))
    small_files_table(connect_server.url, catalog, "t", files=1)
    other = open_session(connect_server.url)
    try:
        names = [r[0] for r in other.sql("SHOW CATALOGS").collect()]
        assert "private" not in names
        assert other.conf.get("spark.sql.catalog.private", None) is None
    finally:
        other.stop()


def test_interrupt_cancels_the_running_operation_on_the_server(connect_server: ConnectServer) -> None:
    run = ConnectRun(connect_server.url, "tms-p1-a1")
    spark = run.open(CatalogSpec(name="lake", warehouse="/tmp/unused-warehouse"))
    errors: list[str] = []

    def long_query() -> None:
        spark.addTag(run.tag)  # pyspark keeps a session's tags per thread: the job's thread tags its work
        try:
            spark.sql("SELECT count(*) FROM range(100000000000)").collect()
        except Exception as e:  # noqa: BLE001 - the interrupt's error is what is checked
            errors.append(str(e))

    worker = threading.Thread(target=long_query)
    worker.start()
    # Until the query was sent (its operation recorded on the server): an interrupt before it would stop
    # the job between operations, and the query would be refused on the client instead (ConnectRun.fence).
    observer = open_session(connect_server.url, run.session_id)
    deadline = time.monotonic() + 120
    while not recorded_operations(observer, run.tag) and not errors and time.monotonic() < deadline:
        time.sleep(0.2)
    close_session(observer)
    interrupted: list[str] = []
    deadline = time.monotonic() + 60
    while not interrupted and time.monotonic() < deadline:
        time.sleep(0.5)
        interrupted = run.interrupt()
    worker.join(60)
    run.close()
    assert interrupted, f"the server interrupted no operation tagged tms-p1-a1; the query said: {errors}"
    assert errors and "OPERATION_CANCELED" in errors[0]


def test_closing_a_session_leaves_the_operations_of_the_others_running(connect_server: ConnectServer) -> None:
    """pyspark 3.5's ``close`` of a client shuts the process-wide pool that sends ``ReleaseExecute``: an
    operation of another session streaming its results then failed with ``Pool not running`` (a CI run
    saw it when a test's observer session closed beside the job's). ``close_session`` closes the session's
    own channel only: the pool stays, and queries on other sessions go on through closes beside them."""
    from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator as Iterator

    kept = open_session(connect_server.url)
    kept.range(10).collect()
    pool = Iterator._release_thread_pool  # noqa: SLF001 - the process-wide pool this test is about
    assert pool is not None
    stop = threading.Event()
    errors: list[str] = []
    answers: list[int] = []

    def queries() -> None:
        while not stop.is_set():
            try:
                answers.append(sum(r[0] for r in kept.range(0, 20_000, numPartitions=4).collect()))
            except Exception as e:  # noqa: BLE001 - any failure beside the closes is what is checked
                errors.append(f"{type(e).__name__}: {e}")
                return

    worker = threading.Thread(target=queries, daemon=True)
    worker.start()
    try:
        for _ in range(12):
            other = open_session(connect_server.url)
            other.range(3).collect()
            close_session(other)
            assert other.client.is_closed
    finally:
        stop.set()
        worker.join(60)
    assert not errors, errors
    assert Iterator._release_thread_pool is pool  # noqa: SLF001
    assert pool._state == "RUN"  # noqa: SLF001 - multiprocessing.pool's running state
    assert answers and set(answers) == {sum(range(20_000))}
    close_session(kept)


def test_a_procedure_s_rows_come_from_its_own_answer_in_one_request(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    """``call_procedure`` on Connect reads the rows the command answered with; ``spark.sql(...).collect()``
    sent them back to the server in a second ``ExecutePlan``. Same rows, one request; a query's (not a
    command's) and a result that is not plain are collected as before."""
    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.spark.connect.command import command_rows
    from airflow_tablemgmt.spark.job.procedures import call_procedure

    catalog = CatalogSpec(name="rows", warehouse=str(tmp_path / "wh"))
    small_files_table(connect_server.url, catalog, "t", files=6)
    small_files_table(connect_server.url, catalog, "twin", files=6)
    spark = open_session(connect_server.url)
    try:
        for key, value in connect_conf(catalog).items():
            spark.conf.set(key, value)
        requests: list[int] = []
        make = spark.client._execute_plan_request_with_metadata

        def counted() -> Any:
            requests.append(1)
            return make()

        spark.client._execute_plan_request_with_metadata = counted
        rows = call_procedure(spark, TableIdentifier("rows", "db", "t"), "rewrite_data_files", {})
        assert len(requests) == 1
        collected = spark.sql("CALL rows.system.rewrite_data_files(table => 'db.twin')").collect()
        assert rows == [r.asDict(recursive=True) for r in collected]
        assert rows[0]["rewritten_data_files_count"] == 6 and rows[0]["added_data_files_count"] == 1
        when = command_rows(spark, "SELECT 1 AS one, timestamp'2026-11-29 00:00:00' AS at")
        assert when[0]["one"] == 1 and isinstance(when[0]["at"], datetime)
    finally:
        close_session(spark)


def test_refresh_is_refused_on_connect_naming_the_table(connect_server: ConnectServer) -> None:
    job = JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "dyn"},
        catalog={"name": "lake", "type": "hadoop", "warehouse": "/tmp/w"},
        action="refresh",
    )
    result = SparkConnectJobHook(url=connect_server.url).submit(job)
    assert not result.ok
    assert result.error_class == "NotOnConnect"
    assert "lake.db.dyn" in (result.error or "") and "spark-submit" in (result.error or "")


def test_an_unreachable_server_is_a_clear_failure_naming_it() -> None:
    url = f"sc://127.0.0.1:{free_port()}"
    job = JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "t"},
        catalog={"name": "lake", "type": "hadoop", "warehouse": "/tmp/w"},
        action="rewrite-files",
    )
    started = time.monotonic()
    result = SparkConnectJobHook(url=url).submit(job)
    assert not result.ok
    assert result.error_class == "ConnectUnavailable"
    assert url in (result.error or "")
    assert time.monotonic() - started < 60


def test_a_slot_reuses_its_configured_session_for_the_same_catalog(
    connect_server: ConnectServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tasks of one catalog, one after the other, through one slot: the second attaches to the session
    the first left configured (catalog loaded) and still compacts its own table; a catalog of other settings
    gets a session of its own. The process rows name the engine and the server."""
    lake = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse"))
    other = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse2"))
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    names = ["r1", "r2"]
    for name in names:
        small_files_table(connect_server.url, lake, name, files=6)
    store.catalogs.upsert(lake, Owner.STORE)
    for name in names:
        store.tables.upsert(
            TableSpec(catalog="lake", namespace="db", name=name, actions={"rewrite-files": {}}), Owner.STORE
        )
    outcomes = []
    for name in names:
        hook = SparkConnectJobHook(
            url=connect_server.url, store=store, slots=1, slot_wait=30, reuse_sessions=True
        )
        runner = ProcessRunner(store, default_factories(), hook)
        outcomes.append(
            runner.run(
                RunRequest(
                    table_id=f"lake.db.{name}",
                    action="rewrite-files",
                    instant=datetime(2026, 1, 1, tzinfo=UTC),
                    holder=f"d/r/{name}/1",
                )
            )
        )
    first, second = (store.processes.get(o.process.id) for o in outcomes)
    assert str(first.status) == str(second.status) == "SUCCESS", (first.failure_reason, second.failure_reason)
    session_of = {p.id: str(p.external_id).split("#")[1].split("/")[0] for p in (first, second)}
    assert session_of[first.id] == session_of[second.id]
    assert outcomes[0].summary["session_reused"] is False and outcomes[1].summary["session_reused"] is True
    assert [o.summary["rewritten_data_files_count"] for o in outcomes] == [6, 6]
    assert first.engine == second.engine == f"spark-connect {connect_server.url}"
    assert table_state(connect_server.url, lake, "lake.db.r2")["files"] < 6
    # Other settings of the same catalog name: the one slot, a new session (never the configured one).
    job = JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "absent"},
        catalog={"name": "lake", "type": "hadoop", "warehouse": other.warehouse},
        action="rewrite-files",
        process_id=99,
    )
    hook = SparkConnectJobHook(
        url=connect_server.url, store=store, slots=1, slot_wait=30, reuse_sessions=True
    )
    result = hook.submit(job)
    assert not result.ok and result.error_class == "TableNotFound", result.error
    assert hook._run is not None and not hook._run.reused and hook._run.session_id not in session_of.values()
    # A planned batch (issue 40): its tables one after another on the session it keeps for their catalog
    # (spark/connect/kept.py), each its own process, lease, tag and guard job, one guard process; a table
    # a job of that session loaded before is read anew (REFRESH TABLE), one it never loaded is not.
    from airflow_tablemgmt.spark.connect.kept import BatchSessions

    for name in ["b1", "b2"]:
        small_files_table(connect_server.url, lake, name, files=6)
        store.tables.upsert(
            TableSpec(catalog="lake", namespace="db", name=name, actions={"rewrite-files": {}}), Owner.STORE
        )
    sessions = BatchSessions()
    batch = []
    guards = set()
    for name in ["b1", "b2", "b1"]:
        hook = SparkConnectJobHook(url=connect_server.url, store=store, slots=1, slot_wait=30)
        hook.use_batch(sessions)
        runner = ProcessRunner(store, default_factories(), hook)
        instant = datetime(2026, 1, 2 + len(batch), tzinfo=UTC)
        batch.append(
            runner.run(RunRequest(table_id=f"lake.db.{name}", action="rewrite-files", instant=instant))
        )
        guards.add(sessions.guard.pid)
    processes = [store.processes.get(o.process.id) for o in batch]
    assert [str(p.status) for p in processes] == ["SUCCESS"] * 3, [p.failure_reason for p in processes]
    kept = {str(p.external_id).split("#")[1].split("/")[0] for p in processes}
    assert len(kept) == 1 and not kept & set(session_of.values())  # the batch's own session, kept
    assert [o.summary["session_reused"] for o in batch] == [False, True, True]
    assert ["table_refresh" in o.summary["timings"] for o in batch] == [False, False, True]
    assert len({str(p.external_id).split("/")[-1] for p in processes}) == 3  # a tag per job
    assert len(guards) == 1 and None not in guards  # one guard process watched the three jobs in turn
    # the first job of b1 compacted it; the second read it anew and found nothing left to rewrite
    assert [o.summary["rewritten_data_files_count"] for o in batch] == [6, 6, 0]
    assert [o.summary["cost"]["jobs"] >= 1 for o in batch[:2]] == [True, True]  # the server's UI asked once
    sessions.close()
    _a_kept_session_job_records_its_start_beside_its_config(connect_server, lake)
    _a_planned_batch_overlaps_its_bookkeeping(connect_server, lake, store, monkeypatch)
    store.dispose()


def _a_kept_session_job_records_its_start_beside_its_config(server: ConnectServer, lake: CatalogSpec) -> None:
    """On a batch's kept session the job's start (``on_started``: its RUNNING row) is recorded in a thread of
    its own while the session's ``Config`` request goes, and has ended before the job's first operation; a
    start that fails fails the job before any operation."""
    from airflow_tablemgmt.spark.connect.kept import KeptSession
    from airflow_tablemgmt.spark.connect.session import run_on_connect

    small_files_table(server.url, lake, "s1", files=4)
    job = JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "s1"},
        catalog={"name": "lake", "type": "hadoop", "warehouse": lake.warehouse},
        action="rewrite-files",
        process_id=77,
    )
    seen: dict[str, Any] = {"ops": []}

    class Watched(ConnectRun):
        def open(self, catalog: CatalogSpec, conf: dict[str, str] | None = None) -> Any:
            session = super().open(catalog, conf)
            seen["opened"] = time.monotonic()
            return session

        def fence(self) -> None:
            seen["ops"].append(time.monotonic())
            super().fence()

    def started(application_id: str) -> None:
        seen["began"], seen["thread"] = time.monotonic(), threading.current_thread().name
        time.sleep(0.3)
        seen["app"], seen["ended"] = application_id, time.monotonic()

    kept = KeptSession(server.url, "h")
    run = Watched(server.url, "tms-p77-a1", session_id=kept.session_id, kept=kept)
    result = run_on_connect(job, server.url, run=run, on_started=started)
    assert result.ok, result.error
    assert seen["thread"] == "tablemgmt-job-started" and seen["app"] == run.application_id
    assert seen["began"] < seen["opened"] < seen["ended"]  # beside the session's Config request
    assert seen["ops"] and min(seen["ops"]) >= seen["ended"]  # both before the job's first operation

    def refused(application_id: str) -> None:
        raise RuntimeError("the store refused the RUNNING row")

    seen["ops"] = []
    again = Watched(server.url, "tms-p78-a1", session_id=kept.session_id, kept=kept, reused=True)
    with pytest.raises(RuntimeError, match="refused the RUNNING row"):
        run_on_connect(
            replace(job, table={**job.table, "name": "s2"}, process_id=78),
            server.url,
            run=again,
            on_started=refused,
        )
    assert seen["ops"] == []  # no operation was sent
    kept.close()


def _a_planned_batch_overlaps_its_bookkeeping(
    server: ConnectServer, lake: CatalogSpec, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40, item 4: a planned batch through its real wiring (``BatchRunners``: the engine each table's
    settings choose, here the server through a ``spark_connect`` connection) with each table's bookkeeping in
    a thread of its own (``batch_overlap.py``): the jobs still one at a time on the calling thread, each its
    own process row, lease and tag on the batch's one session, and each job's cost read after its job (in the
    table's thread) recorded with its process."""
    from airflow_tablemgmt.services.batch_wiring import BatchRunners, after_table, time_limit_for
    from airflow_tablemgmt.services.batches import BatchRun, Outcome, run_batch
    from airflow_tablemgmt.store.enrolment import EnrolmentRepository

    conn = {"conn_type": "spark_connect", "host": server.url, "extra": {"slots": 1}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_BATCH", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID", "spark_connect_batch")
    names = ["o1", "o2", "o3"]
    enrol = EnrolmentRepository.of(store)
    for name in names:
        small_files_table(server.url, lake, name, files=6)
        enrol.enrol(
            TableSpec(catalog="lake", namespace="db", name=name, actions={"rewrite-files": {}}),
            "fleet",
            "matched",
        )
    run = BatchRun(policy="fleet", action="rewrite-files", instant=datetime(2026, 1, 9, tzinfo=UTC))
    runners = BatchRunners(store, "rewrite-files")
    try:
        result = run_batch(
            store,
            run,
            [f"lake.db.{n}" for n in names],
            runner_for=runners,
            limit_for=time_limit_for(store, "rewrite-files"),
            after_table=after_table(None),
            overlap=True,
        )
    finally:
        runners.close()
    assert [t.outcome for t in result.tables] == [Outcome.SUCCESS] * 3, [t.reason for t in result.tables]
    processes = [store.processes.get(t.process_id) for t in result.tables]  # type: ignore[arg-type]
    assert {str(p.external_id).split("#")[1].split("/")[0] for p in processes} == {
        str(processes[0].external_id).split("#")[1].split("/")[0]
    }  # one session the batch kept
    assert len({str(p.external_id).split("/")[-1] for p in processes}) == 3  # a tag per job
    for p in processes:
        assert p.engine == f"spark-connect {server.url}"
        assert p.summary["rewritten_data_files_count"] == 6  # type: ignore[index]
        assert p.summary["cost"]["jobs"] >= 1  # type: ignore[index] - read after the job, recorded with it
        assert "cost_after_job" in p.summary["timings"]  # type: ignore[index]
        assert store.leases.get(p.table_id) is None
    assert all(table_state(server.url, lake, f"lake.db.{n}")["files"] < 6 for n in names)
    # The figures after each compaction were read in the table's thread after its job (after_later.py),
    # and are the table's as its job left it: its files, rows and snapshot, which the process records.
    for name, p in zip(names, processes, strict=True):
        after, before = p.summary["after"], p.summary["before"]  # type: ignore[index]
        state = table_state(server.url, lake, f"lake.db.{name}")
        assert after["data_files"] == state["files"] and before["data_files"] == 6, (after, state)
        assert after["live_records"] == before["live_records"] == after["physical_rows"]
        assert after["current_snapshot_id"] != before["current_snapshot_id"]
        assert p.snapshot_id == after["current_snapshot_id"]
        assert "metrics_after_job" in p.summary["timings"]  # type: ignore[index]


def test_the_early_read_agrees_only_with_a_session_of_the_same_catalog_settings(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    """On Connect the early read's check asks the session's catalog settings in one ``Config`` request
    (``conf_with_prefix``, keys given back whole); the figures after the action rely on it."""
    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.spark.job.early_read import read_early

    catalog = CatalogSpec(name="agree", warehouse=str(tmp_path / "wh"))
    small_files_table(connect_server.url, catalog, "t", files=2)
    early = read_early(catalog, TableIdentifier("agree", "db", "t"))
    assert early is not None and early.shape.total(0) == 2  # data files
    spark = open_session(connect_server.url)
    try:
        assert not early.agrees_with(spark)  # a session without the catalog
        for key, value in connect_conf(catalog).items():
            spark.conf.set(key, value)
        assert early.agrees_with(spark)
        spark.conf.set("spark.sql.catalog.agree.cache-enabled", "true")  # one setting differs
        assert not early.agrees_with(spark)
    finally:
        spark.stop()
