"""A Hudi table written with Hudi's defaults (metadata table on, the writer's own table services as Hudi
ships them), for test_hudi_defaults.py and test_hudi_defaults_mor.py: ``write`` makes three commits on a
copy-on-write table; ``write-mor`` writes a merge-on-read table (an insert, two updates into log files, Hudi's
own compaction, two more updates), so that a clean has whole file slices to remove; ``read`` prints the rows
and their checksum. Run in a child process (a Hudi JVM of its own); the maintenance jobs run through
spark-submit."""

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


#: The same keys on a merge-on-read table (the one setting a MOR table cannot do without).
WRITE_MOR = {**WRITE, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
#: (first id, count, ts, operation) of each commit; 40 rows throughout.
COMMITS = ((0, 40, 0, "insert"), (0, 20, 1, "upsert"), (10, 20, 2, "upsert"))
MOR_AFTER_COMPACTION = ((20, 20, 3, "upsert"), (0, 10, 4, "upsert"))


def main(location: str, mode: str) -> None:
    spark = start_session("hudi")

    def write(options: dict[str, str], commits: tuple[tuple[int, int, int, str], ...]) -> None:
        for first, count, ts, op in commits:
            (
                spark.range(first, first + count)
                .selectExpr("id", "CAST(id % 2 AS INT) AS part", f"{ts} AS ts", f"concat('v{ts}-', id) AS v")
                .write.format("hudi")
                .options(**options)
                .option("hoodie.datasource.write.operation", op)
                .mode("append")
                .save(location)
            )

    if mode == "write":
        write(WRITE, COMMITS)
    elif mode == "write-mor":
        write(WRITE_MOR, COMMITS)
        # Hudi's own compaction (a writer's table service): new base files, so the older file slices
        # become what a clean removes once later commits are written
        # (its trigger set to one delta commit: Hudi's default waits for five)
        spark.sql(
            f"CALL run_compaction(op => 'run', path => '{location}', "
            "options => 'hoodie.compact.inline.max.delta.commits=1')"
        ).collect()
        write(WRITE_MOR, MOR_AFTER_COMPACTION)
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
