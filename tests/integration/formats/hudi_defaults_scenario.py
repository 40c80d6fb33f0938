"""A Hudi table written with Hudi's defaults (metadata table on, the writer's own table services as Hudi
ships them), for test_hudi_defaults.py: ``write`` makes three commits, ``read`` prints the rows and their
checksum. Run in a child process (a Hudi JVM of its own); the maintenance jobs run through spark-submit."""

from __future__ import annotations

import sys

from tests.integration.formats.format_jobs import start_session, step

#: Only what a Hudi write cannot do without: the table's name and keys. Everything else is Hudi's default
#: (copy-on-write, its metadata table on, with the files, column-stats and partition-stats indexes).
WRITE = {
    "hoodie.table.name": "events",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "part",
}


def main(location: str, mode: str) -> None:
    spark = start_session("hudi")
    if mode == "write":
        for first, count, ts, op in ((0, 40, 0, "insert"), (0, 20, 1, "upsert"), (10, 20, 2, "upsert")):
            (
                spark.range(first, first + count)
                .selectExpr("id", "CAST(id % 2 AS INT) AS part", f"{ts} AS ts", f"concat('v{ts}-', id) AS v")
                .write.format("hudi")
                .options(**WRITE)
                .option("hoodie.datasource.write.operation", op)
                .mode("append")
                .save(location)
            )
    row = (
        spark.read.format("hudi")
        .load(location)
        .selectExpr("count(*) AS n", "sum(hash(id, v)) AS c")
        .collect()[0]
    )
    step(mode, rows=row["n"], checksum=row["c"])
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
