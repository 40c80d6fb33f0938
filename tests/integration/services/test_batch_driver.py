"""A planned batch's tables in ONE real spark-submit driver (ADR 0004 decision 3; ``hooks/spark_batch.py``,
``spark/job/batch.py``): two pyiceberg tables of 8 small files in a JDBC catalog on the suite's PostgreSQL,
enrolled by a policy, run through the batch's real wiring (``BatchRunners``: the real lifecycle, the Iceberg
factory, local Spark): one driver compacts both, one after another, each table under its own process (its own
job, attempt and commit), lease (given back after it) and result. The per-table failure, kill and lease-lapse
paths of the same driver loop run without a JVM in tests/unit/hooks/test_spark_batch.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, Owner, TableSpec
from airflow_tablemgmt.services.batch_wiring import BatchRunners
from airflow_tablemgmt.services.batches import BatchRun, Outcome, run_batch
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository
from tests.integration.catalogs.conftest import postgres_database
from tests.support.catalogs import content, seed

pytestmark = pytest.mark.integration

ACTION = "rewrite-files"


def test_one_driver_compacts_a_batchs_tables_each_under_its_own_process_and_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMS_TEST_PG_PASSWORD", "unused")  # the catalog's password reference (trust auth)
    with postgres_database("tms_batch_driver") as database:
        catalog = CatalogSpec(
            name="lake",
            type=CatalogType.JDBC,
            warehouse=f"file://{tmp_path / 'warehouse'}",
            properties={
                "uri": f"jdbc:postgresql://127.0.0.1:5432/{database}",
                "jdbc.user": "postgres",
                "jdbc.password": "env:TMS_TEST_PG_PASSWORD",
            },
        )
        names = ["u1", "u2"]
        before = {n: content(catalog, seed(catalog, n, appends=8)) for n in names}
        store = Store.for_url(f"sqlite:///{tmp_path / 'store.db'}")
        store.catalogs.upsert(catalog, Owner.STORE)
        enrol = EnrolmentRepository.of(store)
        for n in names:
            enrol.enrol(TableSpec(catalog="lake", namespace="db", name=n, actions={ACTION: {}}), "fleet", "m")
        run = BatchRun(
            policy="fleet",
            action=ACTION,
            instant=datetime(2026, 11, 28, 12, tzinfo=UTC),
            dag_id="tms__plan__fleet__rewrite-files",
            run_id="scheduled__2026-11-28T12:00:00+00:00",
            task_id="run_batch",
            map_index=0,
        )
        runners = BatchRunners(store, ACTION, shared=True)
        try:
            result = run_batch(store, run, [f"lake.db.{n}" for n in names], runner_for=runners)
        finally:
            runners.close()
        assert [t.outcome for t in result.tables] == [Outcome.SUCCESS, Outcome.SUCCESS], result.tables
        assert runners.driver is not None and runners.driver.drivers_started == 1  # one JVM for the batch
        processes = [store.processes.get(t.process_id) for t in result.tables]  # type: ignore[arg-type]
        assert all(p.status == ProcessStatus.SUCCESS for p in processes)
        assert len({p.id for p in processes}) == 2 and len({p.external_id for p in processes}) == 1
        for name, p in zip(names, processes, strict=True):
            rows, ids, files, _ = content(catalog, TableIdentifier("lake", "db", name))
            assert (rows, ids) == before[name][:2] and files == 1, (name, rows, ids, files)
            summary = p.summary or {}
            assert (summary["before"]["data_files"], summary["after"]["data_files"]) == (8, 1), summary
            assert store.leases.get(f"lake.db.{name}") is None  # given back after its own job
        store.dispose()


@pytest.mark.on_demand(
    reason="one or two driver JVMs (143 s at load 11-12); CI runs the same guard, per table, in the real driver loop "
    "without a JVM (tests/unit/hooks/test_spark_batch.py: a lapse stops the driver with that table only) and "
    "one real driver over two tables (the test above)"
)
def test_a_table_whose_lease_is_not_confirmed_commits_nothing_and_the_next_table_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real driver, the first table's lease confirmed for 2 s only and never renewed (a frozen worker): its
    guard stops it before its commit (the fence refuses the step, or the guard kills the JVM: which one depends
    on how long the JVM takes to start), the table keeps its 8 files; the batch's next table, confirmed for
    long enough, is compacted (in the same driver or a new one)."""
    import time

    from airflow_tablemgmt.core.actions import ACTIONS
    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.hooks.spark_batch import BatchDriver

    monkeypatch.setenv("TMS_TEST_PG_PASSWORD", "unused")
    with postgres_database("tms_batch_lapse") as database:
        catalog = CatalogSpec(
            name="lake",
            type=CatalogType.JDBC,
            warehouse=f"file://{tmp_path / 'warehouse'}",
            properties={
                "uri": f"jdbc:postgresql://127.0.0.1:5432/{database}",
                "jdbc.user": "postgres",
                "jdbc.password": "env:TMS_TEST_PG_PASSWORD",
            },
        )
        before = {n: content(catalog, seed(catalog, n, appends=8)) for n in ("u1", "u2")}

        def job(name: str, process_id: int) -> JobSpec:
            return JobSpec(
                table={"catalog": "lake", "namespace": "db", "name": name},
                catalog=catalog.model_dump(mode="json"),
                action=ACTION,
                options=ACTIONS.get(ACTION).settings({}).options(),
                process_id=process_id,
            )

        driver = BatchDriver(workdir=str(tmp_path))
        try:
            lapsed = driver.run(job("u1", 1), lease=(time.monotonic(), 2.0))
            after = driver.run(job("u2", 2), lease=(time.monotonic(), 600.0))
        finally:
            driver.close()
        assert lapsed.status == "FAILED" and lapsed.error_class == "LeaseNotConfirmed", lapsed
        assert content(catalog, TableIdentifier("lake", "db", "u1")) == before["u1"]  # nothing committed
        assert after.status == "SUCCESS", after
        rows, ids, files, _ = content(catalog, TableIdentifier("lake", "db", "u2"))
        assert (rows, ids, files) == (*before["u2"][:2], 1)
