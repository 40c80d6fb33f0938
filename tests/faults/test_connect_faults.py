"""Faults of the Spark Connect engine against a real server (on demand: ``TABLEMGMT_CONNECT_FAULTS=1``;
two server starts and table writes take ~3 minutes, beyond the CI budget for this engine).

- kill -9 of the server while a compaction runs: the process ends FAILED with a reason naming the server,
  the table is unchanged or committed (rows and checksum), and the retry after a restart completes it;
- cancel while a compaction runs: the process ends CANCELED and the server interrupted the job's
  operation (its tag), the table unchanged or committed, never half.

    TABLEMGMT_CONNECT_FAULTS=1 TABLEMGMT_FAULT_ROUNDS=10 .venv/bin/python -m pytest tests/faults/test_connect_faults.py
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.services.processes import cancel_process
from airflow_tablemgmt.spark.connect.server import free_port
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.faults.conftest import ROUNDS, Figures
from tests.integration.connect.server import start_connect_server
from tests.integration.connect.test_connect_engine import small_files_table, table_state

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_CONNECT_FAULTS") != "1", reason="on demand: TABLEMGMT_CONNECT_FAULTS=1"
    ),
]

FILES = 200


class _Started:
    """The real hook; ``when_started`` runs in a thread once the job reports its session."""

    def __init__(self, hook: SparkConnectJobHook, when_started: Callable[[], None]) -> None:
        self.hook = hook
        self.when_started = when_started

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        def started(app_id: str) -> None:
            if on_started is not None:
                on_started(app_id)
            threading.Thread(target=self.when_started, daemon=True).start()

        return self.hook.submit(job, on_started=started)

    def kill(self) -> None:
        self.hook.kill()


def _store(tmp_path: Path, catalog: CatalogSpec, names: list[str]) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    store.catalogs.upsert(catalog, Owner.STORE)
    for name in names:
        spec = TableSpec(catalog=catalog.name, namespace="db", name=name, actions={"rewrite-files": {}})
        store.tables.upsert(spec, Owner.STORE)
    return store


def _request(table: str, try_number: int) -> RunRequest:
    return RunRequest(
        table_id=table,
        action="rewrite-files",
        instant=datetime(2026, 1, 1, tzinfo=UTC),
        holder=f"d/r/t/{try_number}",
        try_number=try_number,
        last_try=False,
    )


def test_kill9_of_the_server_fails_the_process_naming_it_and_the_retry_completes(
    tmp_path: Path, figures: Figures
) -> None:
    figures.scenario = "connect: kill -9 of the server mid-compaction"
    port = free_port()
    server = start_connect_server(tmp_path / "server-0.log", port)
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse"))
    names = [f"k{i}" for i in range(ROUNDS)]
    try:
        tables = [small_files_table(server.url, catalog, n, files=FILES) for n in names]
        states = [table_state(server.url, catalog, t) for t in tables]
        store = _store(tmp_path, catalog, names)
        for i, table in enumerate(tables):
            figures.rounds += 1

            def kill_soon(s=server) -> None:  # type: ignore[no-untyped-def]
                time.sleep(1.0)
                s.kill9()

            # Through the slots, as tablemgmt run and the operator run it: the killed job's slot is freed
            # and its session forgotten, the retry's job gets the slot and a new session.
            pooled = SparkConnectJobHook(url=server.url, store=store, slots=1, slot_wait=30)
            runner = ProcessRunner(store, default_factories(), _Started(pooled, kill_soon))
            with pytest.raises(Exception):  # noqa: B017 - JobFailed, whatever the phase the kill hit
                runner.run(_request(table, 1))
            failed = store.processes.list(table_id=table, limit=1)[0]
            assert str(failed.status) == "FAILED", failed
            assert server.url in (failed.failure_reason or ""), failed.failure_reason
            server = start_connect_server(tmp_path / f"server-{i + 1}.log", port)
            now = table_state(server.url, catalog, table)
            assert (now["rows"], now["checksum"]) == (states[i]["rows"], states[i]["checksum"])
            retry_hook = SparkConnectJobHook(url=server.url, store=store, slots=1, slot_wait=30)
            retry = ProcessRunner(store, default_factories(), retry_hook)
            outcome = retry.run(_request(table, 2))
            assert str(outcome.process.status) == "SUCCESS"
            assert retry_hook._run is not None and not retry_hook._run.reused
            after = table_state(server.url, catalog, table)
            assert (after["rows"], after["checksum"]) == (states[i]["rows"], states[i]["checksum"])
            figures.rows_lost += max(0, states[i]["rows"] - after["rows"])
            figures.rows_duplicated += max(0, after["rows"] - states[i]["rows"])
    finally:
        server.stop()


def test_cancel_interrupts_the_job_on_the_server(tmp_path: Path, figures: Figures) -> None:
    figures.scenario = "connect: cancel mid-compaction"
    server = start_connect_server(tmp_path / "server.log")
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse"))
    names = [f"c{i}" for i in range(ROUNDS)]
    try:
        tables = [small_files_table(server.url, catalog, n, files=FILES) for n in names]
        states = [table_state(server.url, catalog, t) for t in tables]
        store = _store(tmp_path, catalog, names)
        for i, table in enumerate(tables):
            figures.rounds += 1
            hook = SparkConnectJobHook(url=server.url)

            def cancel_soon(t=table) -> None:  # type: ignore[no-untyped-def]
                time.sleep(0.5)
                process = store.processes.list(table_id=t, limit=1)[0]
                cancel_process(store, process.id, source="the fault test")

            runner = ProcessRunner(
                store,
                default_factories(),
                _Started(hook, cancel_soon),
                heartbeat_every=timedelta(seconds=0.5),
                stale_after=timedelta(seconds=90),
            )
            try:
                runner.run(_request(table, 1))
            except Exception:  # noqa: BLE001 - ProcessCanceled (or the job won the race)
                pass
            process = store.processes.list(table_id=table, limit=1)[0]
            after = table_state(server.url, catalog, table)
            assert (after["rows"], after["checksum"]) == (states[i]["rows"], states[i]["checksum"])
            if str(process.status) == "SUCCESS":  # committed before the cancel landed: allowed, counted
                figures.notes[f"round {i}"] = "committed before the cancel"
                continue
            assert str(process.status) == "CANCELED", (process.status, process.failure_reason)
            assert hook._run is not None and hook._run.interrupted, "the server interrupted nothing"
    finally:
        server.stop()


def test_a_kept_session_after_a_server_restart_is_set_up_again(tmp_path: Path, figures: Figures) -> None:
    """A slot keeps a configured session; the server restarts (its sessions are gone); the next task of the
    same settings attaches to that session id on the new server, which starts it empty: the task's catalog
    settings are sent again and the job completes."""
    figures.scenario = "connect: a slot's kept session after a server restart"
    port = free_port()
    server = start_connect_server(tmp_path / "server-a.log", port)
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse"))
    try:
        tables = [small_files_table(server.url, catalog, n, files=8) for n in ("s0", "s1")]
        store = _store(tmp_path, catalog, ["s0", "s1"])
        first = SparkConnectJobHook(url=server.url, store=store, slots=1, reuse_sessions=True)
        assert (
            str(ProcessRunner(store, default_factories(), first).run(_request(tables[0], 1)).process.status)
            == "SUCCESS"
        )
        server.stop()
        server = start_connect_server(tmp_path / "server-b.log", port)
        figures.rounds += 1
        second = SparkConnectJobHook(url=server.url, store=store, slots=1, reuse_sessions=True)
        outcome = ProcessRunner(store, default_factories(), second).run(_request(tables[1], 1))
        assert str(outcome.process.status) == "SUCCESS", outcome.process.failure_reason
        assert second._run is not None and second._run.reused
        assert second._run.session_id == first._run.session_id  # type: ignore[union-attr]
        assert outcome.summary["rewritten_data_files_count"] == 8
    finally:
        server.stop()
