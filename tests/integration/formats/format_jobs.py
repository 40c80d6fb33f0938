"""Run a path-based format's jobs in a Spark session of that format alone, in a child process.

Each format gets its own JVM (a Delta session must not share a JVM, and so a classpath, with the Iceberg
session of the other integration tests). The child builds the session exactly as a job does
(``spark.conf.session_conf`` for the format's catalog, the format's jars from the artifact resolver),
writes the table with Spark, and runs each job through the job's entry (``spark/job/main.run``),
printing one JSON line per step; the test reads the table back itself, without Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.formats import TABLE_FORMAT_PROPERTY
from airflow_tablemgmt.core.tables import CatalogSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STEP = "FORMAT_STEP "


def format_catalog(warehouse: Path, fmt: str) -> CatalogSpec:
    return CatalogSpec(name="lake", type="hadoop", warehouse=str(warehouse), properties={})


def start_session(fmt: str, catalog: CatalogSpec | None = None) -> SparkSession:
    """A session of ``fmt`` alone, as a job builds it for ``catalog`` (default: a local warehouse): the
    format's jars, plus what the catalog's warehouse needs (``hadoop-aws`` for ``s3a://``)."""
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
    from airflow_tablemgmt.spark.conf import session_conf
    from airflow_tablemgmt.spark.launch.artifacts import catalog_needs, driver_class_path, jar_paths
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    os.environ.setdefault("JAVA_HOME", str(resolve_java_home()))
    catalog = (
        catalog or CatalogSpec(name="lake", type="hadoop", warehouse="/tmp", properties={})
    ).model_copy(
        update={"properties": {**(catalog.properties if catalog else {}), TABLE_FORMAT_PROPERTY: fmt}}
    )
    needs = catalog_needs(catalog)
    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", ",".join(jar_paths(needs, artifact_settings())))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
    )
    on_driver = driver_class_path(needs, artifact_settings())
    # as a job's launch does: Hudi's bundle on the driver's class path too (spark/launch/artifacts.py)
    if on_driver:
        builder = builder.config("spark.driver.extraClassPath", os.pathsep.join(on_driver))
    for key, value in session_conf(catalog).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_job(spark: SparkSession, job: JobSpec) -> dict[str, Any]:
    """The job through the job's own entry; its parsed result line."""
    from airflow_tablemgmt.spark.job.main import run

    code, line = run(job, spark)
    result = json.loads(line)
    result["exit_code"] = code
    return result


def step(name: str, **data: Any) -> None:
    print(STEP + json.dumps({"step": name, **data}, default=str), flush=True)


def run_scenario(module: str, warehouse: Path, *args: str, timeout: float = 900) -> dict[str, dict[str, Any]]:
    """Run ``module`` (a scenario, ``python -m``, given ``warehouse`` and ``args``) in a child Python; its
    steps by name."""
    proc = subprocess.run(
        [sys.executable, "-m", module, str(warehouse), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parents[3],
    )
    steps = {}
    for line in proc.stdout.splitlines():
        if line.startswith(STEP):
            data = json.loads(line[len(STEP) :])
            steps[data.pop("step")] = data
    if proc.returncode != 0:
        raise AssertionError(f"scenario {module} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return steps
