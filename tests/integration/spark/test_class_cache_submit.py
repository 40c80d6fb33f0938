"""The driver's class-data archive with a real spark-submit: the first run asks for it and exits at once, a
run of its own writes it (``spark/launch/archive_builder.py``), later runs map it.

Proof of use is the driver JVM's own class-loading log (``-Xlog:class+load``, set through the catalog's
``spark.driver.extraJavaOptions``, which also shows the user's options are kept): classes loaded from
the dynamic archive are reported as ``source: shared objects file (top)``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.hooks.spark_job import SparkJobHook
from airflow_tablemgmt.spark.launch import archive_builder
from airflow_tablemgmt.spark.protocol import JobResult
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration

FROM_ARCHIVE = "source: shared objects file (top)"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "jvm"
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "true")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE_DIR", str(directory))
    return directory


def _job(table: TableIdentifier, catalog: CatalogSpec, class_log: Path | None = None) -> JobSpec:
    properties = (
        {"spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={class_log}"} if class_log else {}
    )
    spec = CatalogSpec(name=catalog.name, warehouse=catalog.warehouse, properties=properties)
    return JobSpec(
        table={"catalog": table.catalog, "namespace": table.namespace, "name": table.name},
        catalog=spec.model_dump(mode="json", by_alias=True),
        action="expire-snapshots",
        options={},
        process_id=1,
    )


def _table(make_table: TableFactory, tables: Tables) -> TableIdentifier:
    table = make_table("id bigint, p string, v string", partitioned_by="p", prefix="cds")
    tables.small_files(table, files=2)
    return table


def _archives(directory: Path) -> list[Path]:
    return sorted(directory.glob("driver-*.jsa"))


def _wait_for_the_build(directory: Path, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    time.sleep(1)
    while archive_builder.building(directory) and time.monotonic() < deadline:
        time.sleep(2)
    log = directory / archive_builder.LOG_NAME
    assert not archive_builder.building(directory), log.read_text() if log.exists() else "no builder log"


def test_the_first_run_asks_for_the_archive_a_run_of_its_own_writes_it_and_the_next_maps_it(
    make_table: TableFactory,
    tables: Tables,
    catalog: CatalogSpec,
    cache_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO)
    table = _table(make_table, tables)
    class_log = tmp_path / "classes.log"
    job = _job(table, catalog, class_log)

    first = SparkJobHook("spark_default", workdir=str(tmp_path)).submit(job)

    assert first.ok, first.error
    task_log = caplog.text + capfd.readouterr().out
    assert "JVM class cache: creating" in task_log and "this job runs without it" in task_log
    assert "-XX:ArchiveClassesAtExit" not in task_log  # the job's JVM did not write it at its exit
    assert FROM_ARCHIVE not in class_log.read_text()  # the user's option reached the JVM: kept
    # Written by a run of its own, after the job: the job's exit no longer includes the dump (60-140 s
    # under load before; its normal exit is a few seconds).
    assert first.summary["timings"]["jvm_exit"] < 20, first.summary["timings"]
    _wait_for_the_build(cache_dir)
    (archive,) = _archives(cache_dir)
    assert archive.stat().st_size == int(archive.name.rsplit("-", 1)[1].removesuffix(".jsa"))
    # No temp file, no lock, no request: the archive and the builder's log.
    assert sorted(p.name for p in cache_dir.iterdir()) == sorted([archive.name, archive_builder.LOG_NAME])
    assert "created" in (cache_dir / archive_builder.LOG_NAME).read_text()

    # Through Airflow's SparkSubmitHook this time: the same archive, mapped.
    caplog.clear()
    hook = SparkJobHook("spark_default", workdir=str(tmp_path))
    monkeypatch.setattr(hook, "_direct_connection", lambda: None)
    class_log.unlink()
    second = hook.submit(job)

    assert second.ok, second.error
    task_log = caplog.text + capfd.readouterr().out
    assert f"JVM class cache: using {archive}" in task_log
    loaded = class_log.read_text()
    assert loaded.count(FROM_ARCHIVE) > 1000, loaded[-2000:]
    assert _archives(cache_dir) == [archive]
    assert "writing it in a run of its own" not in task_log  # mapped: nothing more to write

    # What a full disk or an interrupted copy leaves: the job still succeeds, and the archive is
    # removed and created again by this run. On demand (TABLEMGMT_FULL=1): CI has
    # tests/unit/spark/launch/test_class_cache.py::test_a_truncated_archive_is_never_handed_to_a_jvm.
    if os.environ.get("TABLEMGMT_FULL") != "1":
        return
    with archive.open("r+b") as f:
        f.truncate(archive.stat().st_size // 2)
    class_log.unlink()
    third = SparkJobHook("spark_default", workdir=str(tmp_path)).submit(job)

    assert third.ok, third.error
    _wait_for_the_build(cache_dir)
    (replaced,) = _archives(cache_dir)
    assert replaced.stat().st_size == int(replaced.name.rsplit("-", 1)[1].removesuffix(".jsa"))
    assert FROM_ARCHIVE not in class_log.read_text()  # the truncated archive was not mapped


@pytest.mark.on_demand(
    reason="tests/unit/spark/launch/test_class_cache.py races the archive's creation lock without a JVM"
)
def test_two_concurrent_first_runs_both_succeed_and_one_creates(
    make_table: TableFactory,
    tables: Tables,
    catalog: CatalogSpec,
    cache_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.INFO)
    jobs = [_job(_table(make_table, tables), catalog) for _ in range(2)]
    results: list[JobResult] = []

    def run(job: JobSpec) -> None:
        results.append(SparkJobHook("spark_default", workdir=str(tmp_path)).submit(job))

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)

    assert [r.ok for r in results] == [True, True], [r.error for r in results]
    task_log = caplog.text + capfd.readouterr().out  # the Airflow hook's path logs through structlog
    # Both may ask for it (neither holds the lock while its job runs): one build writes it.
    assert task_log.count("JVM class cache: creating") >= 1
    _wait_for_the_build(cache_dir)
    assert len(_archives(cache_dir)) == 1
    assert sorted(p.suffix for p in cache_dir.iterdir()) == [".jsa", ".log"]
