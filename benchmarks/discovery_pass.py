"""What a discovery pass costs (``services/enrolment.py``), without a JVM, on a real catalog.

Creates ``--tables`` Iceberg tables with pyiceberg in its SQL catalog (a SQLite file), spread over two
namespaces (one of two levels, ``sales.eu``), every tenth one opted out by its property; a SQLite store with
one catalog-wide policy; then times, in one process:

* the first pass (every table listed, loaded for its properties, enrolled, each change recorded);
* a pass with nothing to change (the steady state, every interval);
* a pass after one table was created (enrolled) and one dropped (retired);
* a dry run.

Prints a markdown table: seconds per pass, per table, and the changes it made.

    .venv/bin/python benchmarks/discovery_pass.py [--tables 50]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=50)
    args = parser.parse_args()

    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    from airflow_tablemgmt.core.policies import parse_policy
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner
    from airflow_tablemgmt.services.enrolment import discover
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.policies import PolicyRepository

    tmp = Path(tempfile.mkdtemp(prefix="discovery-bench-"))
    warehouse = tmp / "warehouse"
    warehouse.mkdir()
    client = SqlCatalog("lake", uri=f"sqlite:///{tmp / 'catalog.db'}", warehouse=f"file://{warehouse}")
    namespaces = [("sales",), ("sales", "eu")]
    for ns in namespaces:
        client.create_namespace(ns)
    schema = pa.schema([("id", pa.int64())])
    started = time.perf_counter()
    for i in range(args.tables):
        props = {"tablemgmt.maintenance": "disabled"} if i % 10 == 9 else {}
        client.create_table((*namespaces[i % 2], f"t{i:05d}"), schema=schema, properties=props)
    written = time.perf_counter() - started

    store = Store(f"sqlite:///{tmp / 'tablemgmt.db'}")
    store.catalogs.upsert(
        CatalogSpec(
            name="lake",
            type="jdbc",
            warehouse=f"file://{warehouse}",
            properties={"uri": f"jdbc:sqlite:{tmp / 'catalog.db'}"},
        ),
        Owner.STORE,
    )
    policy = {
        "name": "fleet",
        "match": {"catalog": "lake", "format": "iceberg"},
        "actions": {"expire-snapshots": {}},
    }
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)

    rows: list[tuple[str, float, str]] = []

    def timed(label: str, **kw: object) -> None:
        t0 = time.perf_counter()
        result = discover(store, **kw)  # type: ignore[arg-type]
        took = time.perf_counter() - t0
        counts = ", ".join(f"{k} {v}" for k, v in result.to_dict()["counts"].items() if v)
        rows.append((label, took, counts or "none"))

    timed("first pass (enrol)")
    timed("nothing changed")
    client.create_table(("sales", "new_one"), schema=schema)
    client.drop_table(("sales", "t00000"))
    timed("one created, one dropped")
    timed("dry run", dry_run=True)

    print(
        f"{args.tables} tables written by pyiceberg in {written:.1f} s; catalog: pyiceberg's SQL catalog (SQLite)\n"
    )
    print("| pass | seconds | ms per table | changes |")
    print("|---|---:|---:|---|")
    for label, took, counts in rows:
        print(f"| {label} | {took:.2f} | {1000 * took / args.tables:.1f} | {counts} |")
    store.dispose()


if __name__ == "__main__":
    main()
