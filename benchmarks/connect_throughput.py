"""Thousands of small tables: spark-submit per table against the Spark Connect engine (issue 26, item 4).

N tables of 40 small files each, ``rewrite-files``, three ways, in one run:

- **(a) spark-submit** — ``tablemgmt run <table> rewrite-files`` in a fresh process per table: the CLI,
  the store (SQLite), the process row and lease, spark-submit → a driver JVM → ``spark/job/main.py``;
- **(b) connect** — the same ``tablemgmt run`` per table with ``[tablemgmt] spark_connect_conn_id`` set:
  the process is a thin gRPC client of one warm Spark Connect server (started once, before the clock); it
  leases one of the server's slots and (``reuse_sessions: true``) attaches to the session the slot kept;
- **(n) connect, new session per task** — (b) with the connection's ``reuse_sessions: false`` (the
  default): the slot limit holds, every task opens and configures a session of its own;
- **(f) forked task** — Airflow's real task path (``benchmarks/connect_forked.py``): a parent process
  imports ``airflow_tablemgmt.spark.connect.warm`` (what ``airflow_local_settings.py`` imports) and forks
  one child per table, which runs ``tablemgmt run``'s entry in-process (no exec), with the connection's
  defaults (a new session per task, as (n));
- **(p) forked tasks side by side** — (f) with ``--parallel`` tasks at once (default 2), as an executor
  with that parallelism runs them against the one server (its slots bound the jobs);
- **(B) batched** — a planned DAG's mapped batch (issue 40, ``benchmarks/connect_batched.py``): the tables
  enrolled by a policy, cut into batches of ``--batch-size`` (default 50, ``[tablemgmt] plan_batch_size``'s
  default); a parent that imported ``warm`` forks one child per batch, which runs ``RunBatchOperator.execute``
  (``services/batches.py`` with ``services/batch_wiring.py``'s real parts: each table's own process row,
  lease, Connect slot, time limit, gates, and its health measured and stored after its job) on the child's
  one warm Connect client; one batch at a time;
- **(P) batches side by side** — (B) with ``--parallel`` batches at once (as ``plan_max_active_batches``
  lets a planned DAG run them);
- **(c) warm** — the physical limit: one Connect session on that same server running
  ``CALL <catalog>.system.rewrite_data_files(table => ...)`` table after table, no orchestration;
- **(q) warm, side by side** — (c) with ``--parallel`` procedures at once on that session (threads): what the
  server itself gains from running jobs side by side, so that (p) is also compared with a limit that runs
  as many at once.

(p), (P) and (q) are timed from the first task's start to the last one's end; the others by the sum of their
tasks (for (B): of its batches).

Printed per way: seconds per table, tables per minute, the per-table overhead over (c), and the peak RSS
of the task's process tree (the largest single process of it, from ``wait4``: for (a) that is the driver
JVM; for (b) the Python client). Tables are written up front through the server, one set per way. Then
where a Connect task's time goes (medians, from the job's ``timings`` in ``tablemgmt run --json``: the
process's age when the job is submitted, the store's work before it, the slot wait, the client's import,
the session's set-up, the job's phases, the session's close; the rest is the result's recording and the
exit), and the client import with and without setuptools' ``distutils`` shim.

Left out: Airflow around the task (scheduling, the executor, task start, DAG parse: the same for both
ways); running tasks in parallel (one at a time here: a 2-core machine); an object store or a remote
catalog (the warehouse is the local file system); the server's own memory (one JVM for every task,
printed apart); a host's first spark-submit (one warm-up run of (a) before the clock).

A warm server for every way, before any clock: ``--server-warmup`` (150) bare procedures, and for (B)/(P)
``--batch-warmup`` (150) tables of their own through the batched path (a fresh server's procedures keep
getting faster for about 150 tables as its JIT compiles Iceberg's and Spark's code, and the batched path's
procedure, with its options, its own requests and the UI's status API, is other server code: warmed on 10
tables only, its first 60 procedures took 0.197 s on the server against 0.159 s for its next 50); every other round runs the ways in reverse order, so that
no way always meets the server first (``--same-order``: as before). ``--server-cpus 0`` (with
``--master local[1]``) starts the server pinned to CPU 0 and moves this process and every task to the other
CPU(s): the shape of a server on a host of its own, which one 2-core machine can only approximate.

    .venv/bin/python benchmarks/connect_throughput.py [--tables 20] [--tables-a 6] [--files 40] [--master local[2]]
        [--ways a b f p B P c q] [--parallel 2] [--rounds 1] [--batch-size 50]
        [--server-warmup 150] [--batch-warmup 150] [--same-order] [--server-cpus 0 [--client-cpus 1]]

Issue 40's figure (the batched path against the warm session, one batch at a time at the default batch
size, 50, and two side by side):

    .venv/bin/python benchmarks/connect_throughput.py --tables 100 --ways B c P q --batch-size 50 --rounds 2

(B)/(P) leave out, besides the above: Airflow's task start and the scheduler's expansion of the mapped task
(the child starts as a fork of a warm parent, as (f)), the planning task, and XCom.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CATALOG = "lake"
NAMESPACE = "db"
CONN_ID = "spark_connect_bench"


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the process tree's largest process, stdout."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=1800)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... exited {proc.returncode}:\n{err[-3000:]}\n{out[-2000:]}")
    return wall, 0.0, out


def _run_rss(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, float, dict]:
    """Wall seconds, peak RSS (MB) of the largest process of the child's tree (``wait4``), and the run's
    ``--json`` summary (its stdout)."""
    started = time.perf_counter()
    with open(log, "ab") as err, tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([*argv, "--json"], env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode(errors="replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... exited {proc.returncode}; see {log}\n{text[-2000:]}")
    try:
        summary = json.loads(text).get("summary") or {}
    except ValueError:
        summary = {}
    return wall, usage.ru_maxrss / 1024, summary


#: Where a Connect task's time goes: (label, the job's timing keys summed).
PHASES = (
    ("process start to the store: interpreter or fork, CLI imports, parse", ("_before_store",)),
    ("store before the job (process row, lease, claim)", ("store_before_job",)),
    ("slot lease (wait + statements)", ("slot_wait",)),
    ("Connect client import (pyspark, grpc, pandas, pyarrow)", ("connect_import",)),
    ("session open + catalog settings (1 Config request)", ("session_open",)),
    ("table refresh on a reused session", ("table_refresh",)),
    ("job imports (maintainers, pyiceberg)", ("imports",)),
    ("figures before (early read / table load)", ("metrics_before", "table_load")),
    ("the procedure (CALL rewrite_data_files)", ("procedure",)),
    ("figures after", ("metrics_after",)),
    ("maintainer other", ("maintainer_other",)),
    ("session close", ("session_close",)),
    ("after the job: result, process rows, exit", ("_after",)),
)
_JOB_KEYS = (
    "connect_import",
    "session_open",
    "table_refresh",
    "imports",
    "metrics_before",
    "table_load",
    "procedure",
    "metrics_after",
    "maintainer_other",
    "session_close",
)


def _phases(wall: float, summary: dict) -> dict[str, float]:
    t = {k: float(v) for k, v in (summary.get("timings") or {}).items() if isinstance(v, (int, float))}
    before = t.get("process_before_submit", 0.0)
    t["_before_store"] = max(before - t.get("store_before_job", 0.0), 0.0)
    t["_after"] = max(wall - before - t.get("slot_wait", 0.0) - sum(t.get(k, 0.0) for k in _JOB_KEYS), 0.0)
    t["_wall"] = wall
    return t


def _run_forked(
    argv: list[str],
    tables: list[str],
    env: dict[str, str],
    work: Path,
    log: Path,
    profile: bool,
    parallel: int = 1,
) -> tuple[dict[str, float], list[dict[str, float]], dict]:
    """Way (f): ``connect_forked.py`` in a process of its own (the wall of each forked task, its peak RSS
    and timings)."""
    spec = {
        "argv": argv[1:],
        "tables": tables,
        "action": "rewrite-files",
        "out": str(work / "forked.json"),
        "log": str(log),
        "profile": str(work / "profiles") if profile else None,
        "parallel": parallel,
    }
    if profile:
        (work / "profiles").mkdir(exist_ok=True)
    (work / "forked-spec.json").write_text(json.dumps(spec))
    script = Path(__file__).with_name("connect_forked.py")
    subprocess.run([sys.executable, str(script), str(work / "forked-spec.json")], env=env, check=True)
    forked = json.loads((work / "forked.json").read_text())
    runs = forked["runs"]
    # one at a time: the tasks' own time (not the parent's one pre-import); side by side: first start to last end
    total = sum(r["wall"] for r in runs) if parallel == 1 else forked["elapsed"]
    result = {
        "total": total,
        "median": statistics.median(r["wall"] for r in runs),
        "rss": max(r["rss_mb"] for r in runs),
        "n": len(runs),
    }
    return result, [_phases(r["wall"], r["summary"]) for r in runs], forked


#: The ways that run planned batches (connect_batched.py), over tables a policy enrolled.
BATCHED = ("B", "P")
POLICY = "bench"


def _enrol(store_url: str, names: list[str]) -> None:
    """``names`` enrolled by one policy (``bench``, rewrite-files), as discovery enrols them: a planned
    batch runs only its policy's tables."""
    from airflow_tablemgmt.core.policies import parse_policy
    from airflow_tablemgmt.core.tables import Owner, TableSpec
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.enrolment import EnrolmentRepository
    from airflow_tablemgmt.store.policies import PolicyRepository

    store = Store(store_url)
    match = {"catalog": CATALOG, "namespace": NAMESPACE, "name": ["batch_*", "batchpar_*"]}
    policy = {"name": POLICY, "match": match, "actions": {"rewrite-files": {}}}
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
    enrol = EnrolmentRepository.of(store)
    for name in names:
        spec = TableSpec(catalog=CATALOG, namespace=NAMESPACE, name=name, actions={"rewrite-files": {}})
        enrol.enrol(spec, POLICY, "matched")
    store.dispose()


def _run_batched(batches: list[list[str]], env: dict[str, str], work: Path, log: Path, parallel: int) -> dict:
    """Ways (B)/(P): ``connect_batched.py`` in a process of its own."""
    spec = {
        "batches": batches,
        "policy": POLICY,
        "action": "rewrite-files",
        "dag_id": f"tms__plan__{POLICY}__rewrite-files",
        "out": str(work / "batched.json"),
        "log": str(log),
        "parallel": parallel,
    }
    (work / "batched-spec.json").write_text(json.dumps(spec))
    script = Path(__file__).with_name("connect_batched.py")
    subprocess.run([sys.executable, str(script), str(work / "batched-spec.json")], env=env, check=True)
    return json.loads((work / "batched.json").read_text())


def _import_probe(rounds: int = 3) -> dict[str, float]:
    """Median seconds of ``import pyspark.sql.connect.session`` in a fresh interpreter: as pyspark does it
    (setuptools' distutils shim imports setuptools) and as ``session.import_client`` does it."""
    plain = "import time; t = time.perf_counter(); import pyspark.sql.connect.session; print(time.perf_counter() - t)"
    ours = (
        "from airflow_tablemgmt.spark.connect.client import import_client; import time; "
        "t = time.perf_counter(); import_client(); print(time.perf_counter() - t)"
    )
    out: dict[str, float] = {}
    for name, code in (("with the shim", plain), ("shim stepped around", ours)):
        runs = [
            float(
                subprocess.run(
                    [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True
                ).stdout.split()[-1]
            )
            for _ in range(rounds)
        ]
        out[name] = statistics.median(runs)
    return out


def _declarations(warehouse: Path, names: list[str]) -> str:
    lines = [
        "version: 1",
        "catalogs:",
        f"  - name: {CATALOG}",
        "    type: hadoop",
        f"    warehouse: {warehouse}",
    ]
    lines.append("tables:")
    for name in names:
        lines += [
            f"  - catalog: {CATALOG}",
            f"    namespace: {NAMESPACE}",
            f"    name: {name}",
            "    actions:",
            "      rewrite-files: {}",
        ]
    return "\n".join(lines) + "\n"


def _cpus(text: str) -> set[int]:
    """``0`` or ``0,1`` or ``0-1`` as a CPU set."""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _others(text: str) -> str:
    rest = sorted(set(range(os.cpu_count() or 1)) - _cpus(text))
    if not rest:
        raise SystemExit(f"--server-cpus {text} leaves no CPU for the client: give --client-cpus")
    return ",".join(map(str, rest))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=20, help="tables per way (the issue's figure: 200)")
    p.add_argument("--tables-a", type=int, help="tables for (a) only (spark-submit is ~40 s a table loaded)")
    p.add_argument("--slots", type=int, default=4, help="the Connect server's slot limit (the slots extra)")
    p.add_argument("--files", type=int, default=40, help="small data files per table")
    p.add_argument("--master", default="local[2]")
    p.add_argument(
        "--ways",
        nargs="+",
        default=["a", "b", "f", "p", "c", "q"],
        choices=["a", "b", "n", "f", "p", "B", "P", "c", "q"],
    )
    p.add_argument("--batch-size", type=int, default=50, help="(B)/(P): tables per batch (plan_batch_size)")
    p.add_argument(
        "--reuse-sessions",
        action="store_true",
        help="(B)/(P): the connection's reuse_sessions: true (a slot's server session kept across tables)",
    )
    p.add_argument(
        "--no-batch-session",
        action="store_true",
        help="(B)/(P): the connection's batch_session: false (a new session per table, as before issue 40's cut)",
    )
    p.add_argument(
        "--no-overlap",
        action="store_true",
        help="(B)/(P): [tablemgmt] plan_batch_overlap false (each table's bookkeeping before the next job)",
    )
    p.add_argument(
        "--no-ui",
        action="store_true",
        help="the server without its web UI (a default deployment has it on, and each job's cost is read there)",
    )
    p.add_argument("--parallel", type=int, default=2, help="tasks (p) and procedures (q) at once")
    p.add_argument(
        "--rounds", type=int, default=1, help="split each way's tables into rounds, ways interleaved"
    )
    p.add_argument(
        "--server-cpus",
        help="CPUs the server runs on (e.g. 0): it starts pinned there, and this process and every task it "
        "starts move to --client-cpus, the shape of a server on a host of its own",
    )
    p.add_argument(
        "--client-cpus", help="CPUs of this process and its tasks once the server started (e.g. 1)"
    )
    p.add_argument(
        "--server-warmup",
        type=int,
        default=150,
        help="bare procedures on tables of their own before any clock (a fresh server's JIT)",
    )
    p.add_argument(
        "--batch-warmup",
        type=int,
        default=150,
        help="(B)/(P): this many tables of their own, in batches of --batch-size, before any clock",
    )
    p.add_argument(
        "--same-order",
        action="store_true",
        help="every round runs the ways in --ways order (default: every other round reversed)",
    )
    p.add_argument("--profile", action="store_true", help="(f): one cProfile file per child in the workdir")
    p.add_argument("--workdir", type=Path)
    args = p.parse_args()

    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.spark.connect.client import open_session
    from airflow_tablemgmt.spark.connect.server import free_port, server_spec, start_server, wait_for_port
    from airflow_tablemgmt.spark.connect.session import connect_conf
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    # a stopped run (SIGTERM) still stops its server: the finally below runs on SystemExit
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="tms-connect-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    warehouse = work / "warehouse"
    catalog = CatalogSpec(name=CATALOG, warehouse=str(warehouse))
    port = free_port()
    url = f"sc://127.0.0.1:{port}"
    print(
        f"# connect throughput: {args.tables} tables x {args.files} files, master {args.master}, work {work}"
    )
    print(f"# start {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, uptime: {_uptime()}", flush=True)
    ui_port = None if args.no_ui else free_port()
    print(
        f"# server UI: {'off' if ui_port is None else f'on, port {ui_port} (each job reads its cost there)'}"
    )
    if args.server_cpus:
        os.sched_setaffinity(0, _cpus(args.server_cpus))  # the server's JVM inherits these
    server = start_server(server_spec(port=port, master=args.master, ui_port=ui_port), work / "server.log")
    if args.server_cpus or args.client_cpus:
        os.sched_setaffinity(0, _cpus(args.client_cpus or _others(args.server_cpus)))
        print(
            f"# pinned: the server on CPU(s) {sorted(os.sched_getaffinity(server.pid))}, this process and its "
            f"tasks on {sorted(os.sched_getaffinity(0))}",
            flush=True,
        )
    try:
        t0 = time.perf_counter()
        wait_for_port("127.0.0.1", port, 300, server)
        print(f"# server up in {time.perf_counter() - t0:.1f}s", flush=True)
        spark = open_session(url)
        for key, value in connect_conf(catalog).items():
            spark.conf.set(key, value)
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}").collect()
        count = {w: (args.tables_a or args.tables) if w == "a" else args.tables for w in args.ways}
        prefix = {"B": "batch", "P": "batchpar"}
        names = {w: [f"{prefix.get(w, w)}_{i}" for i in range(count[w])] for w in args.ways}
        batch_warmup = (
            [f"warmbatch_{i}" for i in range(args.batch_warmup)]
            if any(w in BATCHED for w in args.ways)
            else []
        )
        enrolled = [n for w in args.ways if w in BATCHED for n in names[w]] + batch_warmup
        server_warmup = [f"warmup_server_{i}" for i in range(args.server_warmup)]
        all_names = [n for w in args.ways for n in names[w]]
        all_names += ["warmup", "warmup_server", *server_warmup, *batch_warmup]
        t0 = time.perf_counter()

        def write(name: str) -> None:
            table = f"{CATALOG}.{NAMESPACE}.{name}"
            spark.sql(f"CREATE TABLE {table} (id bigint, v string) USING iceberg").collect()
            rows = spark.range(args.files * 100).selectExpr("id", "sha1(cast(id AS string)) AS v")
            rows.repartition(args.files).writeTo(table).append()

        # four at a time: the set-up is no part of any figure, and one table's commit overlaps another's tasks
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(write, all_names))
        print(f"# {len(all_names)} tables written in {time.perf_counter() - t0:.1f}s", flush=True)

        # The server's first compaction loads and JIT-compiles Iceberg's code: once, before any clock.
        spark.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => '{NAMESPACE}.warmup_server')").collect()
        # A fresh server's procedures keep getting faster for a few dozen tables (its JIT compiles more of
        # Iceberg's and Spark's code): the ways are compared on a warm server, as the figure is.
        t0 = time.perf_counter()
        for name in server_warmup:
            spark.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => '{NAMESPACE}.{name}')").collect()
        if server_warmup:
            print(
                f"# server warmed up on {len(server_warmup)} procedures in {time.perf_counter() - t0:.1f}s",
                flush=True,
            )
        if (
            ui_port is not None
        ):  # the UI's REST API loads its web framework on its first request: once per server
            import urllib.request

            app = spark.conf.get("spark.app.id")
            t0 = time.perf_counter()
            api = f"http://127.0.0.1:{ui_port}/api/v1/applications/{app}/jobs"
            with urllib.request.urlopen(api, timeout=300) as answer:  # noqa: S310 - the local server's UI
                answer.read()
            print(f"# the server's status API first answered in {time.perf_counter() - t0:.1f}s", flush=True)
        tablemgmt = str(Path(sys.executable).parent / "tablemgmt")
        store = f"sqlite:///{work / 'tablemgmt.db'}"
        decl = work / "tables.yaml"
        decl.write_text(_declarations(warehouse, [n for n in all_names if n not in enrolled]))
        base_env = {
            **os.environ,
            "JAVA_HOME": resolve_java_home(),
            "PYSPARK_PYTHON": sys.executable,
            "AIRFLOW_HOME": str(work / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": args.master}),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        _run([tablemgmt, "--store-url", store, "apply", str(decl)], base_env)
        if enrolled:
            _enrol(store, enrolled)

        def connect_env(extra: dict) -> dict[str, str]:
            conn = {"conn_type": "spark_connect", "host": url, "extra": {"slots": args.slots, **extra}}
            return {
                **base_env,
                f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(conn),
                "AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID": CONN_ID,
            }

        results: dict[str, dict[str, float]] = {}
        phases: dict[str, list[dict[str, float]]] = {}
        batch_cpu: dict[str, list[tuple[float, int]]] = {}  # way -> (a batch task's CPU s, its tables)
        server_cpus: dict[str, list[float]] = {}  # way -> the server JVM's CPU s a table, per round
        log = work / "runs.log"
        if "a" in args.ways:  # a host's first spark-submit writes the driver's class archive
            _run_rss(
                [tablemgmt, "--store-url", store, "run", f"{CATALOG}.{NAMESPACE}.warmup", "rewrite-files"],
                base_env,
                log,
            )
        envs = {
            "a": base_env,
            "b": connect_env({"reuse_sessions": True}),
            "n": connect_env({"reuse_sessions": False}),
        }

        def procedure(name: str) -> float:
            t1 = time.perf_counter()
            spark.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => '{NAMESPACE}.{name}')").collect()
            return time.perf_counter() - t1

        def run_way(way: str, chunk: list[str]) -> tuple[float, list[float], float, list[dict[str, float]]]:
            """One way over ``chunk``: its time, the per-table walls, the peak RSS per task, the phases."""
            ids = [f"{CATALOG}.{NAMESPACE}.{n}" for n in chunk]
            if way in envs:
                walls, rss, ph = [], [], []
                t0 = time.perf_counter()
                for table in ids:
                    argv = [tablemgmt, "--store-url", store, "run", table, "rewrite-files"]
                    wall, peak, summary = _run_rss(argv, envs[way], log)
                    walls.append(wall)
                    rss.append(peak)
                    ph.append(_phases(wall, summary))
                return time.perf_counter() - t0, walls, max(rss), ph
            if way in BATCHED:
                size = max(args.batch_size, 1)
                batched = _run_batched(
                    [ids[i : i + size] for i in range(0, len(ids), size)],
                    {
                        **connect_env(
                            {
                                "reuse_sessions": args.reuse_sessions,
                                "batch_session": not args.no_batch_session,
                            }
                        ),
                        "TABLEMGMT_STORE_URL": store,
                        "AIRFLOW__TABLEMGMT__PLAN_BATCH_OVERLAP": "false" if args.no_overlap else "true",
                    },
                    work,
                    log,
                    args.parallel if way == "P" else 1,
                )
                runs = batched["runs"]
                for r in runs:
                    if r["error"] or r["counts"].get("success") != r["tables"]:
                        print(f"# way {way} batch {r['batch']}: {r['counts']} {r['error'] or ''}", flush=True)
                for r in runs:
                    cpu = float(r.get("cpu_s", 0.0))
                    batch_cpu.setdefault(way, []).append((cpu, int(r["tables"])))
                    print(
                        f"# way {way} batch {r['batch']}: {r['tables']} tables in {r['wall']:.1f} s "
                        f"(task imports {r['imports_s']:.1f} s, execute {r['execute_s']:.1f} s, the task's "
                        f"CPU {cpu:.1f} s, {cpu / max(int(r['tables']), 1):.3f} s a table, Python's cycle "
                        f"collector by generation {r.get('gc_s')} s), {r['counts']}",
                        flush=True,
                    )
                total = sum(r["wall"] for r in runs) if way == "B" else batched["elapsed"]
                walls = [r["wall"] / r["tables"] for r in runs for _ in range(r["tables"])]
                return total, walls, max(r["rss_mb"] for r in runs), []
            if way in "fp":
                parallel = args.parallel if way == "p" else 1
                res, ph, forked = _run_forked(
                    [tablemgmt, "--store-url", store, "run"],
                    ids,
                    connect_env({}),
                    work,
                    log,
                    args.profile and way == "f",
                    parallel,
                )
                return res["total"], [r["wall"] for r in forked["runs"]], res["rss"], ph
            self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            t0 = time.perf_counter()
            if way == "c":
                walls = [procedure(n) for n in chunk]
            else:
                with ThreadPoolExecutor(args.parallel) as pool:
                    walls = list(pool.map(procedure, chunk))
            return time.perf_counter() - t0, walls, self_rss, []

        if batch_warmup:  # the batched path's own server code (its requests, the UI's API) warmed up too
            t0 = time.perf_counter()
            run_way("B", batch_warmup)
            batch_cpu.pop("B", None)
            print(
                f"# {len(batch_warmup)} tables through the batched path before the clock: {time.perf_counter() - t0:.1f}s"
            )
        # Rounds: each way runs its share of the tables once per round, the ways one after another, so a
        # change of the machine's load during the run reaches every way alike.
        acc: dict[str, dict] = {w: {"total": 0.0, "walls": [], "rss": 0.0} for w in args.ways}
        for r in range(args.rounds):
            # every other round in the reverse order: a server still warming up favours no way
            for way in args.ways if r % 2 == 0 or args.same_order else list(reversed(args.ways)):
                chunk = names[way][r :: args.rounds]
                if not chunk:
                    continue
                server_cpu0, own_cpu0 = _cpu_of_tree(server.pid), _own_cpu()
                total, walls, rss, ph = run_way(way, chunk)
                server_cpu = (_cpu_of_tree(server.pid) - server_cpu0) / len(chunk)
                own_cpu = (_own_cpu() - own_cpu0) / len(chunk)
                server_cpus.setdefault(way, []).append(server_cpu)
                print(
                    f"# round {r + 1} way {way}: {len(chunk)} tables, {total / len(chunk):.3f} s a table; "
                    f"the server's CPU {server_cpu:.3f} s a table, this process's {own_cpu:.3f}",
                    flush=True,
                )
                acc[way]["total"] += total
                acc[way]["walls"] += walls
                acc[way]["rss"] = max(acc[way]["rss"], rss)
                phases.setdefault(way, []).extend(ph)
            print(f"# round {r + 1}/{args.rounds} done, load {_load()}", flush=True)
        for way, a in acc.items():
            if a["walls"]:
                results[way] = {
                    "total": a["total"],
                    "median": statistics.median(a["walls"]),
                    "rss": a["rss"],
                    "n": len(a["walls"]),
                }
        spark.stop()
        server_rss = _rss_of_tree(server.pid)
    finally:
        os.killpg(server.pid, 15) if hasattr(os, "killpg") else server.terminate()
        server.wait(timeout=60)
    probe = _import_probe()
    _report(results, server_rss)
    if server_cpus:
        print(
            "The server's CPU a table, per round (s, its JVM's user and system time over each way's tables): "
            + "; ".join(f"({w}) " + ", ".join(f"{c:.3f}" for c in cs) for w, cs in server_cpus.items())
        )
    _report_phases(phases)
    for way, cpus in batch_cpu.items():
        print(
            f"\n({way}) the batch tasks' CPU (wait4: every thread, and the children it waited for): "
            f"{sum(c for c, _ in cpus) / max(sum(n for _, n in cpus), 1):.3f} s a table",
            end="",
        )
    if any(w in BATCHED for w in results):
        _report_batched_phases(work / "tablemgmt.db")
        _report_lanes(work / "runs.log")
    print(
        "\nClient import in a fresh interpreter (median of 3): "
        + ", ".join(f"{k} {v:.2f}s" for k, v in probe.items())
    )
    print(f"# end {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, uptime: {_uptime()}")


def _cpu_of_tree(pid: int) -> float:
    """CPU seconds (user and system) the server's process and its children (the JVM) have used so far."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    """CPU seconds of this process (every thread): way (c)'s client, and the batches' parent."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_of_tree(pid: int) -> float:
    """Current RSS (MB) of the server's JVM (the largest process of its group)."""
    best = 0.0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
            if f"\nPPid:\t{pid}\n" not in text and not status.parent.name == str(pid):
                continue
            for line in text.splitlines():
                if line.startswith("VmRSS:"):
                    best = max(best, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return best


def _report(results: dict[str, dict[str, float]], server_rss: float) -> None:
    labels = {
        "a": "(a) spark-submit per table",
        "b": "(b) Connect, one task per table, slot's session reused",
        "n": "(n) Connect, one task per table, new session per task",
        "f": "(f) Connect, one forked task per table (Airflow's path, warm pre-import)",
        "p": "(p) as (f), tasks side by side",
        "B": "(B) planned batches on Connect, one batch at a time (RunBatchOperator, warm client per batch)",
        "P": "(P) as (B), batches side by side",
        "c": "(c) one warm session",
        "q": "(q) one warm session, procedures side by side",
    }
    per = {w: r["total"] / r["n"] for w, r in results.items()}
    limit = per.get("c")
    print()
    print(
        "| way | tables | s/table (mean) | s/table (median) | tables/min | overhead over (c), s/table "
        "| x (c)'s throughput | peak RSS per task (MB) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for way in ("a", "b", "n", "f", "p", "B", "P", "c", "q"):
        if way not in results:
            continue
        r = results[way]
        over = f"{per[way] - limit:.2f}" if limit is not None else "-"
        ratio = f"{limit / per[way]:.2f}" if limit is not None else "-"
        rss = f"{r['rss']:.0f}" if way not in "cq" else f"{r['rss']:.0f} (this Python, not a task)"
        if way in BATCHED:
            rss = f"{r['rss']:.0f} (per batch)"
        print(
            f"| {labels[way]} | {r['n']:.0f} | {per[way]:.2f} | {r['median']:.2f} | {60 / per[way]:.1f} "
            f"| {over} | {ratio} | {rss} |"
        )
    for way in ("b", "n", "f", "p"):
        if way in per and "a" in per:
            print(f"\n({way})/(a) throughput: {per['a'] / per[way]:.1f}x", end="")
    if "p" in per and "q" in per:
        print(f"\n(p)/(q) throughput (both side by side): {per['q'] / per['p']:.2f}x", end="")
    if "B" in per and "c" in per:
        ok = "met" if per["c"] / per["B"] >= 0.9 else "NOT met"
        print(
            f"\n(B)/(c) throughput (one batch at a time; issue 40: >= 0.9x): {per['c'] / per['B']:.2f}x, {ok}",
            end="",
        )
    if "P" in per and "B" in per:
        print(
            f"\n(P)/(B) throughput (batches side by side against one at a time): {per['B'] / per['P']:.2f}x",
            end="",
        )
    if "P" in per and "q" in per:
        print(f"\n(P)/(q) throughput (both side by side): {per['q'] / per['P']:.2f}x", end="")
    print(f"\nConnect server JVM RSS at the end: {server_rss:.0f} MB (shared by every task)")


def _report_phases(phases: dict[str, list[dict[str, float]]]) -> None:
    ways = [w for w in ("b", "n", "f", "p") if phases.get(w)]
    if not ways:
        return
    print("\nWhere a Connect task's time goes (s, median over its tables):\n")
    print("| phase | " + " | ".join(f"({w})" for w in ways) + " |")
    print("|---|" + "---:|" * len(ways))
    for label, keys in PHASES:
        cells = [statistics.median([sum(p.get(k, 0.0) for k in keys) for p in phases[w]]) for w in ways]
        print(f"| {label} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    walls = [statistics.median([p["_wall"] for p in phases[w]]) for w in ways]
    print("| **wall** | " + " | ".join(f"**{c:.3f}**" for c in walls) + " |")


def _report_lanes(log: Path) -> None:
    """Per batch, the task thread's time in its tables' jobs and waiting for the next table to be ready
    (``services/batch_overlap.py`` logs it; none when the batches ran without overlap)."""
    import re

    found = re.findall(
        r"batch of (\d+) table\(s\): ([\d.]+) s in their jobs, ([\d.]+) s waiting", log.read_text()
    )
    if found:
        print(
            "\nThe task thread per batch (tables, s in their jobs, s waiting for a table to be ready): "
            + "; ".join(f"{n}, {busy}, {idle}" for n, busy, idle in found)
        )


#: A batched table's job phases, from its process row's recorded timings (the job's and the engine's).
BATCHED_PHASES = (
    "slot_wait",
    "session_open",
    "table_refresh",
    "metrics_before",
    "procedure",
    "metrics_after",
    "maintainer_other",
    "cost",
    "session_close",
)


def _report_batched_phases(db: Path) -> None:
    """Where a batched table's time goes (medians over each way's processes, from the store's rows), how
    many server sessions each way's tables used, and the span between two tables' processes."""
    import sqlite3
    from datetime import datetime

    con = sqlite3.connect(str(db))
    rows = con.execute(
        "SELECT table_id, status, external_id, summary, created_at, finished_at FROM tms_process "
        "WHERE table_id LIKE 'lake.db.batch%' ORDER BY id"
    ).fetchall()
    con.close()
    ways = {"B": "lake.db.batch_", "P": "lake.db.batchpar_"}
    print(
        "\nWhere a batched table's time goes (s, median / mean over its processes; the process rows' timings):\n"
    )
    print("| phase | " + " | ".join(f"({w})" for w in ways) + " |")
    print("|---|" + "---:|" * len(ways))
    per: dict[str, list[dict]] = {w: [] for w in ways}
    for table_id, status, external, summary, created, finished in rows:
        way = next((w for w, prefix in ways.items() if table_id.startswith(prefix)), None)
        if way is None:
            continue
        doc = json.loads(summary) if summary else {}
        t = {k: float(v) for k, v in (doc.get("timings") or {}).items() if isinstance(v, (int, float))}
        t["_status"] = status
        t["_session"] = str(external or "").split("#")[-1].split("/")[0]
        try:
            t["_process"] = (
                datetime.fromisoformat(str(finished)) - datetime.fromisoformat(str(created))
            ).total_seconds()
        except (TypeError, ValueError):
            pass
        per[way].append(t)
    for key in (*BATCHED_PHASES, "_process"):
        label = "process row, created to finished" if key == "_process" else key
        cells = []
        for w in ways:
            values = [p.get(key, 0.0) for p in per[w]]
            cells.append(
                f"{statistics.median(values):.3f} / {statistics.mean(values):.3f}" if values else "-"
            )
        print(f"| {label} | " + " | ".join(cells) + " |")
    for w in ways:
        if per[w]:
            statuses = {str(p["_status"]) for p in per[w]}
            sessions = len({p["_session"] for p in per[w]})
            print(
                f"({w}): {len(per[w])} processes, statuses {sorted(statuses)}, {sessions} server session(s)"
            )


if __name__ == "__main__":
    main()
