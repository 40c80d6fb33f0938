"""DAG-file parse cost at 100 / 1,000 / 10,000 table-actions, with tables declared in YAML, in the
store, or both.

For each source and size: N tables with one ``rewrite-files`` action each (snapshot-driven, so an
event-triggered DAG: asset + watcher, a ``check_snapshot`` gate and the ``maintain`` task).

* ``yaml``: every table in ``dags/tables.yaml``; the store starts empty.
* ``store``: every table registered in the store (as ``tablemgmt register`` does); no tables.yaml.
* ``mix``: half in tables.yaml, half in the store.

Then Airflow's own ``DagBag`` parses the shipped DAG file, each time in a fresh process:

* **first parse**: the store holds none of the YAML tables yet (a fresh copy for each run), so the
  parse loads, validates and writes the whole file — what the dag-processor does once after a
  deployment or an edit. Not applicable to ``store``.
* **full parse**: the file already synced — every later dag-processor parse.
* **single-DAG parse**: the parsing context names one DAG (``_AIRFLOW_PARSING_CONTEXT_DAG_ID``), as
  when a task starts.

Each figure is the median of ``--repeat`` processes. A breakdown run (one more process per
phase, with timers around the DAG file's own steps) prints where a parse spends its time: YAML
load (with catalogs), table validation, store read (rows + catalogs + sync records), store write
(the sync), Airflow's DAG construction. Left out of every figure: importing Airflow (printed
separately), serializing the DAGs (``--serialize`` adds it), and the dag-processor's own work
after the parse (writing serialized DAGs to Airflow's database).

    .venv/bin/python benchmarks/dag_parse.py [--source yaml|store|mix|both|all] [--sizes 100 1000 10000]
                                             [--repeat 3] [--serialize]
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
phases = {}
if os.environ.get("BENCH_BREAKDOWN"):
    import airflow_tablemgmt.dag_file as dag_file
    from airflow_tablemgmt.store.tables import TableRepository
    from airflow_tablemgmt.store.catalogs import CatalogRepository
    from airflow_tablemgmt.store.declaration_files import DeclarationFileRepository

    def timed(owner, name, phase):
        real = getattr(owner, name)
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                phases[phase] = phases.get(phase, 0.0) + time.perf_counter() - t
        setattr(owner, name, wrapper)

    timed(dag_file, "begin_parse", "yaml load")
    timed(dag_file, "finish_parse", "validation")
    timed(dag_file, "build_dags", "airflow DAG construction")
    timed(dag_file, "_sync_yaml", "store write (sync)")
    for owner, names in ((TableRepository, ("list_with_errors", "get_registered")),
                         (CatalogRepository, ("list_with_errors",)),
                         (DeclarationFileRepository, ("get_many",))):
        for n in names:
            timed(owner, n, "store read")
t1 = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
t_parse = time.perf_counter() - t1
assert not bag.import_errors, bag.import_errors
import airflow_tablemgmt
out = {"dags": len(bag.dags), "parse_s": t_parse, "import_s": t_import, "phases": phases,
       "package": airflow_tablemgmt.__file__}
if sys.argv[2] == "serialize":
    from airflow.serialization.serialized_objects import DagSerialization
    t2 = time.perf_counter(); size = 0
    for dag in bag.dags.values():
        size += len(json.dumps(DagSerialization.to_dict(dag)))
    out.update(serialize_s=time.perf_counter() - t2, serialized_bytes=size)
print("RESULT " + json.dumps(out))
"""

PHASES = ["yaml load", "validation", "store read", "store write (sync)", "airflow DAG construction"]


def table_doc(i: int) -> dict[str, object]:
    return {"catalog": "lake", "namespace": "bench", "name": f"t{i:05d}", "actions": {"rewrite-files": {"min-input-files": 2}}}  # fmt: skip


def write_yaml(path: Path, indexes: range) -> None:
    lines = ["version: 1", "catalogs:", "  - {name: lake, type: hadoop, warehouse: /tmp/tms-bench-warehouse}"]
    lines.append("tables:")
    for i in indexes:
        lines += [
            "  - catalog: lake",
            "    namespace: bench",
            f"    name: t{i:05d}",
            "    actions:",
            "      rewrite-files: {min-input-files: 2}",
        ]
    path.write_text("\n".join(lines) + "\n")


def populate(store_url: str, indexes: range) -> None:
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, parse_table
    from airflow_tablemgmt.store import Store

    store = Store(store_url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/tms-bench-warehouse"), Owner.STORE)
    for i in indexes:
        store.tables.upsert(parse_table(table_doc(i)), Owner.STORE)
    store.dispose()


def child(dags: Path, env: dict[str, str], mode: str) -> dict[str, object]:
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(dags), mode], capture_output=True, text=True, env=env
    )
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"child failed:\n{res.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def measure(source: str, n: int, repeat: int, serialize: bool) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="tms-bench-parse-"))
    try:
        dags = tmp / "dags"
        dags.mkdir()
        shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", dags)
        in_yaml = range(0, n) if source == "yaml" else range(0, n // 2) if source == "mix" else range(0)
        in_store = range(in_yaml.stop, n)
        db = tmp / "tablemgmt.db"
        url = f"sqlite:///{db}"
        populate(url, in_store)  # also creates the schema
        if len(in_yaml):
            write_yaml(dags / "tables.yaml", in_yaml)
        pristine = tmp / "pristine.db"
        shutil.copy(db, pristine)
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(tmp),
            "TABLEMGMT_STORE_URL": url,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "600",  # measure past Airflow's 30 s default
        }
        env.pop("BENCH_BREAKDOWN", None)

        def fresh_store() -> None:
            for suffix in ("-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            shutil.copy(pristine, db)

        first: list[dict[str, object]] = []
        if len(in_yaml):
            for _ in range(repeat):
                fresh_store()
                first.append(child(dags, env, "parse"))
            fresh_store()
            first_breakdown = child(dags, {**env, "BENCH_BREAKDOWN": "1"}, "parse")
        else:
            first_breakdown = {}
        child(dags, env, "parse")  # sync (a no-op for the store source)
        full = [child(dags, env, "serialize" if serialize else "parse") for _ in range(repeat)]
        full_breakdown = child(dags, {**env, "BENCH_BREAKDOWN": "1"}, "parse")
        single_env = {
            **env,
            "_AIRFLOW_PARSING_CONTEXT_DAG_ID": f"tms__lake.bench.t{n // 2 - 1:05d}__rewrite-files",
            "_AIRFLOW_PARSING_CONTEXT_TASK_ID": "maintain",
        }
        single = [child(dags, single_env, "parse") for _ in range(repeat)]
        single_breakdown = child(dags, {**single_env, "BENCH_BREAKDOWN": "1"}, "parse")
        assert full[0]["dags"] == n and single[0]["dags"] == 1, (full[0], single[0])
        # The measured processes parse with this checkout's package, not another install of it.
        packages = {str(r["package"]) for r in [*first, *full, *single]}
        if any(not p.startswith(str(ROOT)) for p in packages):
            raise SystemExit(f"measured {packages}, not {ROOT}'s package: put {ROOT} first on PYTHONPATH")
        assert not first or first[0]["dags"] == n, first[0]

        def med(runs: list[dict[str, object]], key: str) -> float | None:
            return statistics.median(float(r[key]) for r in runs) if runs else None  # type: ignore[arg-type]

        return {
            "source": source,
            "n": n,
            "first": med(first, "parse_s"),
            "full": med(full, "parse_s"),
            "single": med(single, "parse_s"),
            "import": med(single, "import_s"),
            "serialize": med(full, "serialize_s") if serialize else None,
            "size": full[0].get("serialized_bytes"),
            "breakdown": {"first": first_breakdown, "full": full_breakdown, "single": single_breakdown},
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fmt(v: float | None, digits: int = 2) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--source", choices=["yaml", "store", "mix", "both", "all"], default="both")
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--serialize", action="store_true", help="also time DagSerialization of every DAG")
    args = p.parse_args()
    sources = {"both": ["yaml", "store"], "all": ["yaml", "store", "mix"]}.get(args.source, [args.source])
    # As a deployed Airflow runs: bytecode of this package cached (site-packages is compiled by
    # `make install`), so a parse does not include compiling our modules.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "airflow_tablemgmt")], check=True)
    rows = [measure(s, n, args.repeat, args.serialize) for s in sources for n in args.sizes]
    load = os.getloadavg()
    print(
        f"load average before printing: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)\n"
    )
    ser = " serialize (s) | serialized size |" if args.serialize else ""
    print(f"| source | table-actions | first parse (s) | full parse (s) | single-DAG parse (s) |{ser} airflow import (s, not in parse) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|" + ("---:|---:|" if args.serialize else "") + "---:|")
    for r in rows:
        extra = f" {fmt(r['serialize'])} | {(r['size'] or 0) / 1e6:.1f} MB |" if args.serialize else ""  # type: ignore[operator]
        print(
            f"| {r['source']} | {r['n']:,} | {fmt(r['first'])} | {fmt(r['full'])} | {fmt(r['single'], 3)} |{extra}"
            f" {fmt(r['import'])} |"
        )
    print(
        "\nWhere the time goes (s), from one more run of each parse with timers around the DAG file's steps:\n"
    )
    print(
        "| source | table-actions | parse | run total | " + " | ".join(PHASES) + " | rest (DagBag, imports) |"
    )
    print("|---|---:|---|---:|" + "---:|" * (len(PHASES) + 1))
    for r in rows:
        for kind in ("first", "full", "single"):
            run = r["breakdown"][kind]  # type: ignore[index]
            if not run:
                continue
            phases, total = run["phases"], float(run["parse_s"])
            cells = " | ".join(fmt(phases.get(ph), 3) if ph in phases else "—" for ph in PHASES)
            rest = total - sum(phases.values())
            print(f"| {r['source']} | {r['n']:,} | {kind} | {fmt(total)} | {cells} | {fmt(rest, 3)} |")
    print("\ntargets at 10,000: first parse <= 10 s, full parse <= 5 s, single-DAG parse <= 0.3 s")


if __name__ == "__main__":
    main()
