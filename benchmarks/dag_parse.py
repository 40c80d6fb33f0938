"""DAG-file parse cost at 100 / 1,000 / 10,000 table-actions, with tables declared in YAML, in the
store, or both.

For each source and size: N tables with one ``rewrite-files`` action each (snapshot-driven, so an
event-triggered DAG: asset + watcher, a ``check_snapshot`` gate and the ``maintain`` task).

* ``yaml``: every table in ``dags/tables.yaml``; the store starts empty.
* ``store``: every table registered in the store (as ``tablemgmt register`` does); no tables.yaml.
* ``mix``: half in tables.yaml, half in the store.
* ``enrolled``: every table enrolled by one policy (``fleet``, the same ``rewrite-files`` settings), as
  discovery writes them (``managed_by`` policy); no tables.yaml. Such a table has no DAG of its own: the
  policy's planned DAG ``tms__plan__fleet__rewrite-files`` runs it (ADR 0004), beside the policy's discovery
  DAG, so a parse builds 2 DAGs whatever N is. Its rows are written directly (bulk inserts of what
  ``EnrolmentRepository.enrol`` writes, without its records), not by a discovery pass.

Then Airflow's own ``DagBag`` parses the shipped DAG file, each time in a fresh process, with the
per-host cache of built DAGs (``airflow_tablemgmt/dag_factory/cache.py``) in ``$AIRFLOW_HOME`` as deployed:

* **first parse**: the store holds none of the YAML tables yet (a fresh copy for each run) and there
  is no cache file, so the parse loads, validates and writes the whole file, builds every DAG and
  writes the cache — what the dag-processor does once after a first deployment. Not applicable to
  ``store``.
* **cold-cache parse**: the store in sync, no cache file (a new host, or an upgrade of this package,
  Airflow or its configuration, which discards the cache): every DAG built, the cache written.
* **full parse**: the parse after those (store in sync, cache warm) — every later dag-processor
  parse. Each run checks that every table came from the cache.
* **full parse, one table edited**: one table's declaration changed before each run (its YAML entry,
  or its store row for ``store``): that one table is validated, synced and built (checked), the
  other tables come from the cache, and the cache file is rewritten.
* **full parse, cache off**: ``[tablemgmt] dag_cache_dir = off``: every DAG built, as before the cache.
* **single-DAG parse**: the parsing context names one DAG (``_AIRFLOW_PARSING_CONTEXT_DAG_ID``), as
  when a task starts (the cache is not read): a table's own DAG, or for ``enrolled`` the planned DAG
  (its ``plan`` task).

For ``enrolled`` only the full parse (cache on: the enrolled rows are read and left out, nothing to build
but the planned and discovery DAGs), the full parse with the cache off and the single-DAG parse apply; the
other columns print ``—``.

Each figure is the median of ``--repeat`` processes. A breakdown run (one more process per
phase, with timers around the DAG file's own steps) prints where a parse spends its time: YAML
load (with catalogs), table validation, store read (rows + catalogs + sync records), store write
(the sync), cache read (the cache's keys, reading the file and unpickling the hits), Airflow's DAG
construction (``build_dags``: only the cache's misses when the cache is on), cache write (pickling
the built tables, writing the file). Left out of every figure: importing Airflow (printed
separately), serializing the DAGs (``--serialize`` adds it), and the dag-processor's own work
after the parse (serializing the DAGs and writing them to Airflow's database, which the cache does
not change); the wall clock of a process is its CPU time only on an idle machine, so run it on one
(the load average is printed).

    .venv/bin/python benchmarks/dag_parse.py [--source yaml|store|mix|enrolled|both|all ...]
                                             [--sizes 100 1000 10000] [--repeat 3] [--serialize]

``--source yaml enrolled --sizes 10000``: the per-table shape and the planned shape side by side in one run
(issue 40: 10,000 policy-enrolled tables within the YAML tables' budgets, full <= 5 s, single DAG <= 0.2 s).
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
# The package the measured processes import: a copy of this checkout's, taken when the benchmark
# starts (set in main), so edits made while it runs neither mix into its figures nor, by changing
# the code's digest, discard the DAG cache between two runs.
SRC = ROOT

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
t_import = time.perf_counter() - t0
phases = {}
if os.environ.get("BENCH_BREAKDOWN"):
    import airflow_tablemgmt.dag_factory.dag_file as dag_file
    import airflow_tablemgmt.declarations.registry as registry
    from airflow_tablemgmt.store.tables import TableRepository
    from airflow_tablemgmt.store.catalogs import CatalogRepository
    from airflow_tablemgmt.store.declaration_files import DeclarationFileRepository

    def timed(owner, name, phase):
        real = getattr(owner, name)
        def wrapper(*a, **k):
            t = time.process_time()
            try:
                return real(*a, **k)
            finally:
                phases[phase] = phases.get(phase, 0.0) + time.process_time() - t
        setattr(owner, name, wrapper)

    timed(registry, "begin_parse", "yaml load")
    timed(registry, "finish_parse", "validation")
    import airflow_tablemgmt.dag_factory.cache as dag_cache
    import airflow_tablemgmt.dag_factory.build as dag_build
    import airflow_tablemgmt.declarations.sync as declarations_sync
    # dag_file imports these when a parse needs them (a planned DAG's task start does not): patched where
    # they live, after the cache module took its own reference to build_dags (timed on its own below).
    timed(dag_build, "build_dags", "airflow DAG construction")
    timed(dag_cache, "build_dags", "airflow DAG construction")
    timed(declarations_sync, "sync", "store write (sync)")
    import airflow_tablemgmt.dag_factory.discovery as discovery
    import airflow_tablemgmt.dag_factory.plan as plan
    timed(plan, "build_plan_dags", "airflow DAG construction")
    timed(discovery, "build_discovery_dags", "airflow DAG construction")
    timed(discovery, "stored_policies", "store read")
    for owner, names in ((TableRepository, ("list_with_errors", "get_registered")),
                         (CatalogRepository, ("list_with_errors",)),
                         (DeclarationFileRepository, ("get_many",))):
        for n in names:
            timed(owner, n, "store read")
t1 = time.perf_counter(); c1 = time.process_time()
bag = DagBag(dag_folder=sys.argv[1])
t_parse = time.perf_counter() - t1; c_parse = time.process_time() - c1
assert not bag.import_errors, bag.import_errors
import airflow_tablemgmt
from airflow_tablemgmt.dag_factory import cache as dag_cache
stats = dag_cache.last_stats
if os.environ.get("BENCH_BREAKDOWN") and stats.path:
    phases["cache read"] = stats.read_s
    phases["cache write"] = stats.write_s
out = {"dags": len(bag.dags), "parse_s": t_parse, "parse_cpu_s": c_parse, "import_s": t_import, "phases": phases,
       "package": airflow_tablemgmt.__file__, "cache": [stats.hits, len(stats.built), stats.path, stats.discarded]}
if sys.argv[2] == "serialize":
    from airflow.serialization.serialized_objects import DagSerialization
    t2 = time.perf_counter(); size = 0
    for dag in bag.dags.values():
        size += len(json.dumps(DagSerialization.to_dict(dag)))
    out.update(serialize_s=time.perf_counter() - t2, serialized_bytes=size)
print("RESULT " + json.dumps(out))
"""

PHASES = [
    "yaml load",
    "validation",
    "store read",
    "store write (sync)",
    "cache read",
    "airflow DAG construction",
    "cache write",
]


def table_doc(i: int, min_input_files: int = 2) -> dict[str, object]:
    return {
        "catalog": "lake",
        "namespace": "bench",
        "name": f"t{i:05d}",
        "actions": {"rewrite-files": {"min-input-files": min_input_files}},
    }


def edit_one_table(dags: Path, store_url: str, in_yaml: range, in_store: range, k: int) -> None:
    """Change one table's declaration (``min-input-files: 3 + k``): its first YAML entry, else a store row."""
    if len(in_yaml):
        y = dags / "tables.yaml"
        text = y.read_text()
        head, sep, tail = text.partition("rewrite-files: {min-input-files: ")
        y.write_text(head + sep + str(3 + k) + tail[tail.index("}") :])
        return
    from airflow_tablemgmt.core.tables import Owner, parse_table
    from airflow_tablemgmt.store import Store

    store = Store(store_url)
    store.tables.upsert(parse_table(table_doc(in_store[0], 3 + k)), Owner.STORE)
    store.dispose()


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


POLICY = "fleet"
PLAN_DAG = f"tms__plan__{POLICY}__rewrite-files"


def parse_env(home: Path, store_url: str) -> dict[str, str]:
    """The environment of a parse child: Airflow's home and the tablemgmt store, no examples, no breakdown."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "TABLEMGMT_STORE_URL": store_url,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "600",
    }
    env.pop("BENCH_BREAKDOWN", None)
    return env


def populate_enrolled(store_url: str, indexes: range) -> None:
    """One store policy and ``indexes`` tables enrolled by it, written as ``EnrolmentRepository.enrol``
    writes a table's row (its columns, ``managed_by`` policy, the policy's name), in bulk."""
    from airflow_tablemgmt.core.policies import parse_policy
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, parse_table
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.clock import utcnow
    from airflow_tablemgmt.store.models import TableRow
    from airflow_tablemgmt.store.policies import PolicyRepository
    from airflow_tablemgmt.store.tables import _columns_of, _validated

    store = Store(store_url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/tms-bench-warehouse"), Owner.STORE)
    actions = table_doc(0)["actions"]
    policy = {"name": POLICY, "match": {"catalog": "lake", "format": "iceberg"}, "actions": actions}
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
    now = utcnow()
    rows = []
    for i in indexes:
        columns = _columns_of(_validated(parse_table(table_doc(i))))
        rows.append(
            dict(
                columns,
                table_id=f"lake.bench.t{i:05d}",
                managed_by=str(Owner.POLICY),
                policy=POLICY,
                created_at=now,
                updated_at=now,
            )
        )
    with store.engine.begin() as conn:
        for k in range(0, len(rows), 5000):
            conn.execute(TableRow.__table__.insert(), rows[k : k + 5000])
    store.dispose()


def child(dags: Path, env: dict[str, str], mode: str) -> dict[str, object]:
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(dags), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=dags.parent,
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
        shutil.copy(SRC / "dags" / "tablemgmt_dags.py", dags)
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

        cache_dir = tmp / "tablemgmt" / "dag-cache"

        def cold_cache() -> None:
            shutil.rmtree(cache_dir, ignore_errors=True)

        def expect(run: dict[str, object], hits: int | None, built: int | None) -> dict[str, object]:
            got = run["cache"]  # [hits, built, path]
            if (hits is not None and got[0] != hits) or (built is not None and got[1] != built):  # type: ignore[index]
                raise SystemExit(f"expected {hits} cache hits and {built} built, got {got}")
            return run

        first: list[dict[str, object]] = []
        if len(in_yaml):
            for _ in range(repeat):
                fresh_store()
                cold_cache()
                first.append(expect(child(dags, env, "parse"), 0, n))
            fresh_store()
            cold_cache()
            first_breakdown = child(dags, {**env, "BENCH_BREAKDOWN": "1"}, "parse")
        else:
            first_breakdown = {}
        child(dags, env, "parse")  # sync (a no-op for the store source)
        cold: list[dict[str, object]] = []
        for _ in range(repeat):
            cold_cache()
            cold.append(expect(child(dags, env, "parse"), 0, n))
        full = [expect(child(dags, env, "serialize" if serialize else "parse"), n, 0) for _ in range(repeat)]
        full_breakdown = expect(child(dags, {**env, "BENCH_BREAKDOWN": "1"}, "parse"), n, 0)
        edited: list[dict[str, object]] = []
        for k in range(repeat + 1):
            edit_one_table(dags, url, in_yaml, in_store, k)
            run = expect(
                child(dags, {**env, "BENCH_BREAKDOWN": "1"} if k == repeat else env, "parse"), n - 1, 1
            )
            if k == repeat:
                edited_breakdown = run
            else:
                edited.append(run)
        off_env = {**env, "AIRFLOW__TABLEMGMT__DAG_CACHE_DIR": "off"}
        off = [child(dags, off_env, "parse") for _ in range(repeat)]
        off_breakdown = child(dags, {**off_env, "BENCH_BREAKDOWN": "1"}, "parse")
        single_env = {
            **env,
            "_AIRFLOW_PARSING_CONTEXT_DAG_ID": f"tms__lake.bench.t{n // 2 - 1:05d}__rewrite-files",
            "_AIRFLOW_PARSING_CONTEXT_TASK_ID": "maintain",
        }
        single = [child(dags, single_env, "parse") for _ in range(repeat)]
        single_breakdown = child(dags, {**single_env, "BENCH_BREAKDOWN": "1"}, "parse")
        assert full[0]["dags"] == n and single[0]["dags"] == 1, (full[0], single[0])
        assert all(r["dags"] == n for r in [*cold, *edited, *off]), "a parse lost DAGs"
        # The measured processes parse with this checkout's package, not another install of it.
        packages = {str(r["package"]) for r in [*first, *cold, *full, *edited, *off, *single]}
        if any(not p.startswith(str(SRC)) for p in packages):
            raise SystemExit(f"measured {packages}, not the copy of {ROOT}'s package in {SRC}")
        assert not first or first[0]["dags"] == n, first[0]

        def med(runs: list[dict[str, object]], key: str) -> float | None:
            return statistics.median(float(r[key]) for r in runs) if runs else None  # type: ignore[arg-type]

        return {
            "source": source,
            "n": n,
            "dags": full[0]["dags"],
            "first": med(first, "parse_s"),
            "first_cpu": med(first, "parse_cpu_s"),
            "cold": med(cold, "parse_s"),
            "cold_cpu": med(cold, "parse_cpu_s"),
            "full": med(full, "parse_s"),
            "full_cpu": med(full, "parse_cpu_s"),
            "edited": med(edited, "parse_s"),
            "edited_cpu": med(edited, "parse_cpu_s"),
            "off": med(off, "parse_s"),
            "off_cpu": med(off, "parse_cpu_s"),
            "single": med(single, "parse_s"),
            "single_cpu": med(single, "parse_cpu_s"),
            "import": med(single, "import_s"),
            "serialize": med(full, "serialize_s") if serialize else None,
            "size": full[0].get("serialized_bytes"),
            "breakdown": {
                "first": first_breakdown,
                "full": full_breakdown,
                "one edited": edited_breakdown,
                "cache off": off_breakdown,
                "single": single_breakdown,
            },
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure_enrolled(n: int, repeat: int, serialize: bool) -> dict[str, object]:
    """The planned shape: ``n`` tables enrolled by one policy; full (cache on and off) and single-DAG parses."""
    tmp = Path(tempfile.mkdtemp(prefix="tms-bench-parse-"))
    try:
        dags = tmp / "dags"
        dags.mkdir()
        shutil.copy(SRC / "dags" / "tablemgmt_dags.py", dags)
        url = f"sqlite:///{tmp / 'tablemgmt.db'}"
        populate_enrolled(url, range(n))
        env = parse_env(tmp, url)
        child(dags, env, "parse")  # the first parse writes the (empty) cache file
        full = [child(dags, env, "serialize" if serialize else "parse") for _ in range(repeat)]
        full_breakdown = child(dags, {**env, "BENCH_BREAKDOWN": "1"}, "parse")
        off_env = {**env, "AIRFLOW__TABLEMGMT__DAG_CACHE_DIR": "off"}
        off = [child(dags, off_env, "parse") for _ in range(repeat)]
        off_breakdown = child(dags, {**off_env, "BENCH_BREAKDOWN": "1"}, "parse")
        single_env = {
            **env,
            "_AIRFLOW_PARSING_CONTEXT_DAG_ID": PLAN_DAG,
            "_AIRFLOW_PARSING_CONTEXT_TASK_ID": "plan",
        }
        single = [child(dags, single_env, "parse") for _ in range(repeat)]
        single_breakdown = child(dags, {**single_env, "BENCH_BREAKDOWN": "1"}, "parse")
        # The planned DAG and the policy's discovery DAG, no DAG per enrolled table; a task start builds one.
        for r in [*full, *off]:
            if r["dags"] != 2:
                raise SystemExit(f"enrolled: expected 2 DAGs (planned + discovery), got {r['dags']}")
        if single[0]["dags"] != 1:
            raise SystemExit(f"enrolled: the single-DAG parse built {single[0]['dags']} DAGs")
        packages = {str(r["package"]) for r in [*full, *off, *single]}
        if any(not p.startswith(str(SRC)) for p in packages):
            raise SystemExit(f"measured {packages}, not the copy of {ROOT}'s package in {SRC}")

        def med(runs: list[dict[str, object]], key: str) -> float | None:
            return statistics.median(float(r[key]) for r in runs) if runs else None  # type: ignore[arg-type]

        none: dict[str, object] = {k: None for k in ("first", "cold", "edited")}
        none.update({f"{k}_cpu": None for k in ("first", "cold", "edited")})
        return {
            **none,
            "source": "enrolled",
            "n": n,
            "dags": full[0]["dags"],
            "full": med(full, "parse_s"),
            "full_cpu": med(full, "parse_cpu_s"),
            "off": med(off, "parse_s"),
            "off_cpu": med(off, "parse_cpu_s"),
            "single": med(single, "parse_s"),
            "single_cpu": med(single, "parse_cpu_s"),
            "import": med(single, "import_s"),
            "serialize": med(full, "serialize_s") if serialize else None,
            "size": full[0].get("serialized_bytes"),
            "breakdown": {"full": full_breakdown, "cache off": off_breakdown, "single": single_breakdown},
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def uptime() -> str:
    """``uptime``'s line: the machine's load when the figures were taken."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def fmt(v: float | None, digits: int = 2) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def both(r: dict[str, object], key: str, digits: int = 2) -> str:
    """``wall (CPU)`` of one parse: on a loaded machine the CPU time is the figure to compare."""
    wall, cpu = r[key], r[f"{key}_cpu"]
    return "—" if wall is None else f"{fmt(wall, digits)} ({fmt(cpu, digits)})"  # type: ignore[arg-type]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument(
        "--source",
        nargs="+",
        choices=["yaml", "store", "mix", "enrolled", "both", "all"],
        default=["both"],
        help="one or more; both = yaml store, all = yaml store mix",
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--serialize", action="store_true", help="also time DagSerialization of every DAG")
    args = p.parse_args()
    groups = {"both": ["yaml", "store"], "all": ["yaml", "store", "mix"]}
    sources = list(dict.fromkeys(s for name in args.source for s in groups.get(name, [name])))
    started = uptime()
    # As a deployed Airflow runs: bytecode of this package cached (site-packages is compiled by
    # `make install`), so a parse does not include compiling our modules.
    global SRC
    SRC = Path(tempfile.mkdtemp(prefix="tms-bench-src-"))
    try:
        shutil.copytree(
            ROOT / "airflow_tablemgmt",
            SRC / "airflow_tablemgmt",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        shutil.copytree(ROOT / "dags", SRC / "dags")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(SRC / "airflow_tablemgmt")], check=True)
        rows = [
            measure_enrolled(n, args.repeat, args.serialize)
            if s == "enrolled"
            else measure(s, n, args.repeat, args.serialize)
            for n in args.sizes
            for s in sources
        ]
    finally:
        shutil.rmtree(SRC, ignore_errors=True)
    print(f"uptime at the start: {started}")
    print(f"uptime at the end:   {uptime()} ({os.cpu_count()} CPUs)\n")
    ser = " serialize (s) | serialized size |" if args.serialize else ""
    print("Each cell: median wall clock (median CPU time of the parsing process), seconds.\n")
    print(
        f"| source | table-actions | DAGs | first parse (s) | cold-cache parse (s) | full parse (s) | full parse, one table edited (s) | full parse, cache off (s) | single-DAG parse (s) |{ser} airflow import (s, not in parse) |"
    )
    print(
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.serialize else "") + "---:|"
    )
    for r in rows:
        extra = f" {fmt(r['serialize'])} | {(r['size'] or 0) / 1e6:.1f} MB |" if args.serialize else ""  # type: ignore[operator]
        print(
            f"| {r['source']} | {r['n']:,} | {r['dags']:,} | {both(r, 'first')} | {both(r, 'cold')} | {both(r, 'full')} |"
            f" {both(r, 'edited')} | {both(r, 'off')} | {both(r, 'single', 3)} |{extra} {fmt(r['import'])} |"
        )
    print(
        "\nWhere the time goes (CPU s of the parsing process), from one more run of each parse with timers"
        " around the DAG file's steps:\n"
    )
    print(
        "| source | table-actions | parse | run total (CPU) | "
        + " | ".join(PHASES)
        + " | rest (DagBag, imports) |"
    )
    print("|---|---:|---|---:|" + "---:|" * (len(PHASES) + 1))
    for r in rows:
        for kind in ("first", "full", "one edited", "cache off", "single"):
            run = r["breakdown"].get(kind)  # type: ignore[attr-defined]
            if not run:
                continue
            phases, total = run["phases"], float(run["parse_cpu_s"])
            cells = " | ".join(fmt(phases.get(ph), 3) if ph in phases else "—" for ph in PHASES)
            rest = total - sum(phases.values())
            print(f"| {r['source']} | {r['n']:,} | {kind} | {fmt(total)} | {cells} | {fmt(rest, 3)} |")
    print("\nCPU seconds of the parsing process (median) against issue 40's budgets at 10,000 tables:\n")
    print("| source | tables | DAGs | full parse CPU (s) | <= 5 s | single-DAG parse CPU (s) | <= 0.2 s |")
    print("|---|---:|---:|---:|---|---:|---|")
    for r in rows:
        full, single = float(r["full_cpu"]), float(r["single_cpu"])  # type: ignore[arg-type]
        print(
            f"| {r['source']} | {r['n']:,} | {r['dags']:,} | {full:.2f} | {'met' if full <= 5 else 'NOT met'} |"
            f" {single:.3f} | {'met' if single <= 0.2 else 'NOT met'} |"
        )
    print("\nearlier targets at 10,000: first parse <= 10 s, full parse <= 5 s, single-DAG parse <= 0.3 s")


if __name__ == "__main__":
    main()
