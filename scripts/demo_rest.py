"""The parts of `DEMO_CATALOG=rest make demo` that talk to its REST catalog and S3 (called by scripts/demo.sh).

``serve --dir D --env-file F``: start SeaweedFS's S3 gateway and Iceberg's reference REST catalog server
on it (the servers the test suite starts: ``tests/support/servers.py``), write their addresses and the S3
key pair as shell assignments to ``F``, then wait; SIGTERM / SIGINT stops both servers.

``table --tables-yaml Y``: write the demo's table (``scripts/demo_table.py``'s data: many small files and
position deletes) with Spark through the catalog declared in ``Y``, as the product renders it for its jobs.

``orphans --tables-yaml Y plant old|young N``, ``orphans ... list``, ``orphans ... wait-old``: files no
snapshot references, written straight to S3 under the table's data directory; ``list`` prints each with the
time S3 gave it; ``wait-old`` waits, if needed, until the "old" ones are older than the delete-orphans
action's ``older-than`` (plus a margin), so the age rule always separates old from young.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

TABLE = "demo.db.events"
#: The env: references of tables.demo.rest.yaml's S3 key pair.
KEY_ENV = ("DEMO_S3_ACCESS_KEY_ID", "DEMO_S3_SECRET_ACCESS_KEY")
#: How much older than the cutoff an "old" orphan is made to be before delete-orphans runs.
MARGIN = timedelta(seconds=30)


def serve(directory: Path, env_file: Path) -> int:
    from tests.support.servers import ACCESS_KEY, SECRET_KEY, IcebergRestServer, SeaweedS3

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    s3 = SeaweedS3(directory / "s3")
    rest = IcebergRestServer(directory / "rest", s3)
    try:
        t0 = time.monotonic()
        s3.start()
        rest.start()
        assert s3.proc is not None and rest.proc is not None
        values = {
            "DEMO_S3_ENDPOINT": s3.endpoint,
            "DEMO_S3_BUCKET": s3.bucket,
            "DEMO_REST_URI": rest.uri,
            "DEMO_REST_WAREHOUSE": rest.warehouse,
            KEY_ENV[0]: ACCESS_KEY,
            KEY_ENV[1]: SECRET_KEY,
            # Process groups of the two servers: the demo's exit trap stops them even if this process died.
            "DEMO_SERVER_PGIDS": f"{s3.proc.pid} {rest.proc.pid}",
            "DEMO_SERVERS_UP_S": f"{time.monotonic() - t0:.0f}",
        }
        tmp = env_file.with_suffix(".tmp")
        tmp.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in values.items()))
        tmp.chmod(0o600)
        tmp.replace(env_file)  # the demo polls for this file: it appears complete
        while not stop.wait(1):
            for name, proc in (("SeaweedFS", s3.proc), ("REST catalog", rest.proc)):
                if proc.poll() is not None:
                    print(
                        f"demo_rest: the {name} server exited ({proc.returncode}); see {directory}",
                        file=sys.stderr,
                    )
                    return 1
        return 0
    except Exception as e:  # noqa: BLE001 - the demo shows this line and the server logs
        print(f"demo_rest: the servers did not start: {e}", file=sys.stderr)
        return 1
    finally:
        rest.stop()
        s3.stop()


def catalog_of(tables_yaml: Path) -> Any:
    """The demo catalog as declared in the rendered tables.yaml, its references resolved (as on a worker)."""
    from airflow_tablemgmt.declarations.parse import parse_declarations_text
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec

    # The below-floor notes were shown when the demo applied the file; not again on every call here.
    logging.getLogger("airflow_tablemgmt.core.tables").setLevel(logging.ERROR)
    loaded = parse_declarations_text(tables_yaml.read_text(), str(tables_yaml))
    if loaded.errors:
        raise SystemExit(f"{tables_yaml}: {loaded.errors}")
    [catalog] = [c for c in loaded.catalogs if c.name == TABLE.split(".")[0]]
    return resolve_catalog_spec(catalog)


def make_table(tables_yaml: Path, files: int, delete_every: int, delete_commits: int) -> int:
    import os

    from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
    from airflow_tablemgmt.spark.conf import base_conf, catalog_conf
    from airflow_tablemgmt.spark.launch.artifacts import catalog_needs, jar_paths
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    catalog = catalog_of(tables_yaml)
    os.environ.setdefault("JAVA_HOME", resolve_java_home())
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from demo_table import add_position_deletes, create_table  # type: ignore[import-not-found]
    from pyspark.sql import SparkSession

    t0 = time.monotonic()
    builder = SparkSession.builder.master("local[2]").appName("tablemgmt-demo-data")
    conf = {
        **base_conf(),
        **catalog_conf(catalog),  # the REST catalog and Iceberg's S3FileIO, as the product's jobs get them
        "spark.jars": ",".join(jar_paths(catalog_needs(catalog), artifact_settings())),
    }
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    create_table(spark, TABLE, files, 200_000)
    if delete_every:
        add_position_deletes(spark, TABLE, delete_every, delete_commits)
    n = spark.sql(f"SELECT count(*) AS n, sum(file_size_in_bytes) AS b FROM {TABLE}.data_files").first()
    d = spark.sql(f"SELECT count(*) FROM {TABLE}.delete_files").first()[0]
    r = spark.sql(f"SELECT count(*) FROM {TABLE}").first()[0]
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {TABLE}").where("col_name = 'Location'").first()
    print(
        f"created {TABLE} through the REST catalog {catalog.properties['uri']}: {n.n} data files, {d} delete "
        f"files, {n.b} bytes, {r} live records in {time.monotonic() - t0:.1f}s; location "
        f"{location.data_type if location else '?'}"
    )
    spark.stop()
    return 0


class Orphans:
    """Files under the table's data directory on S3 that no snapshot references (pyarrow, not the product)."""

    def __init__(self, tables_yaml: Path) -> None:
        import pyarrow.fs as pafs
        from pyiceberg.catalog import load_catalog

        from airflow_tablemgmt.core.storage import pyiceberg_properties

        catalog = catalog_of(tables_yaml)
        self.catalog = catalog
        props = pyiceberg_properties(catalog.warehouse, catalog.properties)
        table = load_catalog(catalog.name, type="rest", **props).load_table(tuple(TABLE.split(".")[1:]))
        self.prefix = table.metadata.location.removeprefix("s3://").removeprefix("s3a://") + "/data"
        p = catalog.properties
        self.fs = pafs.S3FileSystem(
            access_key=p["s3.access-key-id"],
            secret_key=p["s3.secret-access-key"],
            endpoint_override=p["s3.endpoint"].split("://", 1)[1],
            scheme=p["s3.endpoint"].split("://", 1)[0],
            region=p["client.region"],
            force_virtual_addressing=False,
        )
        self.older_than = self._older_than(tables_yaml)

    @staticmethod
    def _older_than(tables_yaml: Path) -> timedelta:
        import yaml

        from airflow_tablemgmt.core.durations import to_timedelta

        doc = yaml.safe_load(tables_yaml.read_text())
        [table] = [t for t in doc["tables"] if f"{t['catalog']}.{t['namespace']}.{t['name']}" == TABLE]
        return to_timedelta(table["actions"]["delete-orphans"]["older-than"])

    def plant(self, kind: str, n: int) -> None:
        for i in range(1, n + 1):
            with self.fs.open_output_stream(f"{self.prefix}/orphan-{kind}-{i}.parquet") as f:
                f.write(b"orphan")
        self.list(f"planted {n} {kind} orphan(s) on S3; every orphan now:")

    def found(self) -> list[tuple[str, datetime]]:
        import pyarrow.fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(self.prefix, allow_not_found=True))
        out = []
        for info in infos:
            if info.base_name.startswith("orphan-"):
                mtime = info.mtime if info.mtime.tzinfo else info.mtime.replace(tzinfo=UTC)
                out.append((info.path, mtime))
        return sorted(out)

    def list(self, title: str = "orphans left on S3:") -> None:
        print(title)
        now = datetime.now(UTC)
        found = self.found()
        for path, mtime in found:
            print(f"  s3://{path}  written {mtime:%H:%M:%S} UTC ({(now - mtime).total_seconds():.0f} s ago)")
        if not found:
            print("  none")

    def wait_old(self) -> None:
        old = [m for p, m in self.found() if "/orphan-old-" in p]
        if not old:
            return
        ready = max(old) + self.older_than + MARGIN
        wait = (ready - datetime.now(UTC)).total_seconds()
        if wait > 0:
            print(
                f"  waiting {wait:.0f} s until the old orphans are older than older-than "
                f"({self.older_than}) plus {MARGIN.seconds} s",
                flush=True,
            )
            time.sleep(wait)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--dir", type=Path, required=True)
    s.add_argument("--env-file", type=Path, required=True)
    t = sub.add_parser("table")
    t.add_argument("--tables-yaml", type=Path, required=True)
    t.add_argument("--files", type=int, default=520)
    t.add_argument("--delete-every", type=int, default=50)
    t.add_argument("--delete-commits", type=int, default=3)
    o = sub.add_parser("orphans")
    o.add_argument("--tables-yaml", type=Path, required=True)
    o.add_argument("what", choices=["plant", "list", "wait-old"])
    o.add_argument("kind", nargs="?", choices=["old", "young"])
    o.add_argument("n", nargs="?", type=int, default=0)
    args = p.parse_args(argv)
    if args.command == "serve":
        return serve(args.dir, args.env_file)
    if args.command == "table":
        return make_table(args.tables_yaml, args.files, args.delete_every, args.delete_commits)
    orphans = Orphans(args.tables_yaml)
    if args.what == "plant":
        if args.kind is None or args.n < 1:
            p.error("orphans plant needs KIND (old or young) and N >= 1")
        orphans.plant(args.kind, args.n)
    elif args.what == "wait-old":
        orphans.wait_old()
    else:
        orphans.list()
    return 0


if __name__ == "__main__":
    sys.exit(main())
