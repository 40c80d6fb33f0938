"""Import the Connect engine's client side ahead of the tasks: ``import airflow_tablemgmt.spark.connect.warm``
in a deployment's ``airflow_local_settings.py``.

Airflow 3's LocalExecutor forks its workers from the scheduler, and each task process is forked from its
worker (``supervise``; the Celery worker's pool likewise), so what the scheduler imported at start the task
process has already: the interpreter's start and these imports (pyspark's Connect client with grpc, pandas
and pyarrow; the job code; pyiceberg), seconds of a small table's task, are paid once per deployment
instead of once per task. The price is memory in every Airflow process that reads
``airflow_local_settings.py`` (about 100 MB: the api-server, the dag-processor and the triggerer too). Only
modules are imported: no gRPC channel exists before the fork.
"""

from __future__ import annotations

import importlib
import time

from airflow_tablemgmt.spark.connect.client import import_client

#: The modules a Connect task imports, beyond Airflow's own.
MODULES = (
    "airflow_tablemgmt.hooks.spark_connect",
    "airflow_tablemgmt.lifecycle",
    "airflow_tablemgmt.store",
    "airflow_tablemgmt.formats.iceberg.factory",
    "airflow_tablemgmt.spark.job.main",
    "airflow_tablemgmt.spark.job.maintainers",
    "airflow_tablemgmt.spark.job.early_read",
    "airflow_tablemgmt.spark.job.metrics",
    "pyiceberg.table",
    # what the task's run reaches next: the engine's choice, the slots, the store's SQL dialects, and
    # pyiceberg's Arrow file IO that the job's figures read the table's files with (measured in a forked
    # task, benchmarks/connect_throughput.py way (f): 0.5-1 s of imports per task without them)
    "airflow_tablemgmt.hooks.engine",
    "airflow_tablemgmt.hooks.secrets",
    "airflow_tablemgmt.factories.discovery",
    "airflow_tablemgmt.services.processes",
    "airflow_tablemgmt.services.reap",
    "airflow_tablemgmt.store.connect_slots",
    "airflow_tablemgmt.spark.connect.pool",
    "airflow_tablemgmt.spark.connect.policy",
    "pyspark.sql.connect.catalog",
    "grpc._channel",
    "pyiceberg.io.pyarrow",
    "pyiceberg.catalog",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    # a planned DAG's mapped batch (issue 40): its operator's first execute imported these in every batch's
    # task, 1-2 s (benchmarks/connect_batched.py's "task imports")
    "airflow_tablemgmt.hooks.tablemgmt",
    "airflow_tablemgmt.operators.maintenance",
    "airflow_tablemgmt.operators.time_limit",
    "airflow_tablemgmt.services.batches",
    "airflow_tablemgmt.services.batch_wiring",
    "airflow_tablemgmt.services.batch_overlap",
    "airflow_tablemgmt.services.health",
    "airflow_tablemgmt.notifications.health",
    "airflow_tablemgmt.hooks.spark_batch",
    "airflow_tablemgmt.spark.connect.kept",
    "airflow_tablemgmt.spark.connect.cost",
    "airflow.sdk.execution_time.timeout",
    # what a batch's task still imported during its execute (benchmarks/connect_batched.py logs them:
    # 0.12 s a batch, 2026-11-29, 35 ms of it the Iceberg maintainers its first job waited for)
    "airflow_tablemgmt.formats.iceberg.job.compaction",
    "airflow_tablemgmt.formats.iceberg.job.orphans",
    "airflow_tablemgmt.formats.iceberg.job.snapshots",
    "airflow_tablemgmt.formats.iceberg.job.stats",
    "airflow_tablemgmt.formats.iceberg.job.ttl",
    "airflow_tablemgmt.spark.job.plugins",
    "airflow_tablemgmt.spark.job.procedures",
    "airflow_tablemgmt.spark.job.after_later",
    "airflow_tablemgmt.spark.connect.command",
    "airflow_tablemgmt.spark.connect.finish_later",
    "airflow_tablemgmt.spark.connect.guard",
    "airflow_tablemgmt.spark.connect.operations",
    "airflow_tablemgmt.store.catalogs",
    "airflow_tablemgmt.store.leases",
    "airflow_tablemgmt.store.process_cost",
    "airflow_tablemgmt.store.process_rollup",
    "airflow_tablemgmt.store.processes",
    "airflow_tablemgmt.store.table_health",
    "airflow_tablemgmt.store.tables",
    "airflow_tablemgmt.lineage.spark",
    "airflow_tablemgmt.metadata.table_check",
    "airflow_tablemgmt.triggers.format_readers",
    "pyiceberg.avro.decoder_fast",
    "pyiceberg.catalog.noop",
    "airflow.sdk.definitions.connection",
    "airflow.sdk.execution_time.supervisor",
    "encodings.idna",
    "airflow_tablemgmt.formats.iceberg.marks",
    "airflow.sdk.execution_time.cache",
    "airflow.sdk.observability.stats",
)


def preimport() -> float:
    """Import the client, :data:`MODULES` and every installed format's factory module; the seconds it took."""
    started = time.perf_counter()
    import_client()
    for name in MODULES:
        importlib.import_module(name)
    format_factories()
    return time.perf_counter() - started


def format_factories() -> list[str]:
    """Import the factory module of every installed format (this package's and the plugins'), found through
    the format registry's entry points, none named here; the modules imported. A batch's task builds every
    format's factory (``factories/discovery.py``), and imported those it was not given here in each batch
    (30 ms a batch, 2026-11-29). A format that fails to load is left to the task, whose log names why."""
    from airflow_tablemgmt.core.formats import FORMATS

    imported: list[str] = []
    for fmt in FORMATS.all():
        module = fmt.factory.partition(":")[0]
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001, S112 - the task imports it again and reports the failure
            continue
        imported.append(module)
    return imported


SECONDS = preimport()
