"""DAG-file parse cost at 100 / 1,000 / 10,000 registered table-actions.

For each size: a fresh SQLite store with N/2 tables x 2 actions (rewrite-files, expire-snapshots),
then Airflow's own DagBag parses the shipped DAG file (a) in full, as the dag-processor does, and
(b) with the parsing context naming one DAG, as a task start does. Serialization time and size are
measured with Airflow's DagSerialization. Each figure is the median of --repeat runs, each in a
fresh subprocess so no import or store cache carries over.

    .venv/bin/python benchmarks/dag_parse.py [--sizes 100 1000 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
t_import = time.perf_counter() - t0
t1 = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
t_parse = time.perf_counter() - t1
assert not bag.import_errors, bag.import_errors
out = {"dags": len(bag.dags), "parse_s": t_parse, "import_s": t_import}
if sys.argv[2] == "serialize":
    from airflow.serialization.serialized_objects import DagSerialization
    t2 = time.perf_counter(); size = 0
    for dag in bag.dags.values():
        size += len(json.dumps(DagSerialization.to_dict(dag)))
    out.update(serialize_s=time.perf_counter() - t2, serialized_bytes=size)
print("RESULT " + json.dumps(out))
"""


def populate(store_url: str, n_actions: int) -> None:
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, parse_table
    from airflow_tablemgmt.store import Store

    store = Store(store_url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/warehouse"), Owner.STORE)
    for i in range(n_actions // 2):
        spec = parse_table(
            {"catalog": "lake", "namespace": "bench", "name": f"t{i:05d}",
             "actions": {"rewrite-files": {"min-input-files": 2}, "expire-snapshots": {"retain-last": 2}}}
        )  # fmt: skip
        store.tables.upsert(spec, Owner.STORE)
    store.dispose()


def child(dags: Path, env: dict[str, str], mode: str) -> dict[str, float]:
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(dags), mode], capture_output=True, text=True, env=env
    )
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"child failed:\n{res.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def main() -> None:
    # As a deployed Airflow runs: bytecode of this package cached (site-packages is compiled by
    # `make install`), so a parse does not include compiling our modules.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "airflow_tablemgmt")], check=True)
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    rows = []
    for n in args.sizes:
        tmp = Path(tempfile.mkdtemp(prefix="tms-bench-parse-"))
        dags = tmp / "dags"
        dags.mkdir()
        shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", dags)
        (dags / "tables.yaml").write_text("version: 1\ncatalogs: []\ntables: []\n")
        url = f"sqlite:///{tmp / 'tablemgmt.db'}"
        populate(url, n)
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(tmp),
            "TABLEMGMT_STORE_URL": url,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        }
        full = [child(dags, env, "serialize") for _ in range(args.repeat)]
        one = f"tms__lake.bench.t{(n // 2) // 2:05d}__rewrite-files"
        single_env = {
            **env,
            "_AIRFLOW_PARSING_CONTEXT_DAG_ID": one,
            "_AIRFLOW_PARSING_CONTEXT_TASK_ID": "maintain",
        }
        single = [child(dags, single_env, "parse") for _ in range(args.repeat)]
        assert full[0]["dags"] == n and single[0]["dags"] == 1, (full[0], single[0])
        rows.append(
            (n, statistics.median(r["parse_s"] for r in full), statistics.median(r["serialize_s"] for r in full),
             full[0]["serialized_bytes"], statistics.median(r["parse_s"] for r in single),
             statistics.median(r["import_s"] for r in single))
        )  # fmt: skip
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        "| table-actions | full parse (s) | serialize (s) | serialized size | single-DAG parse (s) | airflow import (s, not in parse) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n, fp, ser, size, sp, imp in rows:
        print(f"| {n:,} | {fp:.2f} | {ser:.2f} | {size / 1e6:.1f} MB | {sp:.3f} | {imp:.2f} |")
    print("\ntargets at 10,000: full parse <= 5 s, single-DAG parse <= 0.3 s")


if __name__ == "__main__":
    main()
