"""The toyparquet driver side: ``MAINTAINERS``, against the driver's public API only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.spark.job.plugins import TableIdentifier, take_location, timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def compact(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    import glob
    import os
    import shutil

    options = dict(options)
    location = take_location(options, "compact")
    root = location.removeprefix("file:")
    before = sorted(glob.glob(os.path.join(root, "*.parquet")))
    with timed("procedure"):
        df = spark.read.parquet(*before)
        rows = df.count()
        staging = root.rstrip("/") + ".compacting"
        df.coalesce(int(options.get("files", 1))).write.mode("overwrite").parquet(staging)
        for path in before:
            os.remove(path)
        for path in glob.glob(os.path.join(staging, "*.parquet")):
            shutil.move(path, root)
        shutil.rmtree(staging)
    after = sorted(glob.glob(os.path.join(root, "*.parquet")))
    return {"before": {"data_files": len(before)}, "after": {"data_files": len(after)}, "rows": rows}


MAINTAINERS = {"compact": compact}
