"""Typed helpers for the Spark integration tests (imported by conftest.py and the tests)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from airflow_tablemgmt.core.identifiers import TableIdentifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.core.tables import CatalogSpec


def job_spec(
    table: TableIdentifier, catalog: CatalogSpec, action: str, options: dict[str, object], process_id: int = 7
) -> JobSpec:
    """The JobSpec a worker hands the job for ``action`` on ``table`` with these (already parsed) options."""
    from airflow_tablemgmt.core.factory import JobSpec

    return JobSpec(
        table={"catalog": table.catalog, "namespace": table.namespace, "name": table.name},
        catalog=catalog.model_dump(mode="json", by_alias=True),
        action=action,
        options=options,
        process_id=process_id,
    )


class TableFactory(Protocol):
    """Creates a new, empty Iceberg table with a unique name in ``lake.db``."""

    def __call__(
        self,
        columns: str,
        *,
        partitioned_by: str | None = None,
        props: dict[str, str] | None = None,
        prefix: str = "t",
    ) -> TableIdentifier: ...


class Tables:
    """Helpers bound to the shared session: content checksums, file layout, small-file writers."""

    def __init__(self, spark: SparkSession, warehouse: Path) -> None:
        self.spark = spark
        self.warehouse = warehouse

    def dir(self, table: TableIdentifier) -> Path:
        return self.warehouse / table.namespace / table.name

    def content(self, table: TableIdentifier) -> tuple[int, int]:
        """``(row count, sum of a hash of every column)``: equal before and after a rewrite."""
        row = self.spark.sql(
            f"SELECT count(*) AS n, coalesce(sum(cast(hash(*) AS bigint)), 0) AS h FROM {table.quoted}"
        ).collect()[0]
        return int(row["n"]), int(row["h"])

    def small_files(self, table: TableIdentifier, files: int, rows: int = 20, commits: int = 1) -> None:
        """Append ``commits`` commits, each of ``files`` tiny files per partition of (``id, p, v``).

        Every write task holds rows of both partitions 'a' and 'b', and the write neither shuffles
        nor clusters (``distribution-mode=none``, fanout), so each task leaves one file per partition.
        """
        for c in range(commits):
            start = c * files * rows
            self.spark.range(start, start + files * rows, 1, numPartitions=files).selectExpr(
                "id",
                "CASE WHEN id % 2 = 0 THEN 'a' ELSE 'b' END AS p",
                "concat('v', cast(id AS string)) AS v",
            ).writeTo(str(table)).option("distribution-mode", "none").option(
                "fanout-enabled", "true"
            ).append()

    def data_files(self, table: TableIdentifier) -> list[str]:
        rows = self.spark.sql(f"SELECT file_path FROM {table.quoted}.`all_files`").collect()
        return sorted({r["file_path"] for r in rows})


__all__ = ["TableFactory", "Tables"]
