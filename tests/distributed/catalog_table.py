"""Write the distributed test's table into a catalog server with Spark (local[2]), the same data as
``scripts/demo_table.py`` (many small files over a few day partitions), through the catalog's settings
as the product renders them for its own jobs (``catalog_conf``, the jars ``catalog_needs`` names).

    python -m tests.distributed.catalog_table --catalog '<CatalogSpec JSON>' --table dist.db.events \
        --files 16 --rows 8000

Secrets in the spec are references (``env:``), resolved here as on a worker. Run as a subprocess: the
Spark session's JVM goes with it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tests.e2e.conftest import ROOT


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--catalog", required=True, help="a CatalogSpec as JSON")
    p.add_argument("--table", required=True)
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--rows", type=int, default=8000)
    args = p.parse_args(argv)

    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from airflow_tablemgmt.spark.conf import base_conf, catalog_conf
    from airflow_tablemgmt.spark.launch.artifacts import catalog_needs, jar_paths
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    catalog = resolve_catalog_spec(CatalogSpec.model_validate(json.loads(args.catalog)))
    os.environ.setdefault("JAVA_HOME", resolve_java_home())
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    sys.path.insert(0, str(ROOT / "scripts"))
    from demo_table import create_table  # type: ignore[import-not-found]

    t0 = time.monotonic()
    builder = SparkSession.builder.master("local[2]").appName("tablemgmt-distributed-data")
    conf = {
        **base_conf(),
        **catalog_conf(catalog),
        "spark.ui.enabled": "false",
        "spark.jars": ",".join(jar_paths(catalog_needs(catalog), artifact_settings())),
    }
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    create_table(spark, args.table, args.files, args.rows)
    n = spark.sql(f"SELECT count(*) FROM {args.table}.data_files").first()[0]
    print(f"created {args.table}: {n} data files in {time.monotonic() - t0:.1f}s")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
