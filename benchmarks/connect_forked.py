"""Way (f) of ``connect_throughput.py``: the path an Airflow task really takes on the Connect engine.

Airflow's LocalExecutor (and Celery's prefork pool) forks each task process from a parent that imported
what ``airflow_local_settings.py`` imports; with ``import airflow_tablemgmt.spark.connect.warm`` there,
the task starts with pyspark's Connect client and the job code already imported. This process is that
parent: it imports ``warm`` (the same module, so exactly what it pre-imports), then per table forks a
child that runs ``tablemgmt run <table> <action> --json`` through the console script's entry
(``airflow_tablemgmt.cli.main``) in-process, no exec, waits for it, and goes on to the next table.

It runs as a process of its own, started by the benchmark: the benchmark's process holds a gRPC channel
to the server, which must not cross a fork (nor does one in Airflow: ``warm`` opens none).

    python benchmarks/connect_forked.py SPEC.json

SPEC: ``{"argv": [tablemgmt's arguments before the table], "tables": [...], "action": "rewrite-files",
"out": result path, "log": stderr log path, "profile": a directory for one cProfile file per child, or
null, "parallel": children at once (1)}``. The result: ``{"preimport_s", "parent_rss_mb", "elapsed",
"parallel", "runs": [{"table", "wall", "rss_mb", "summary"}]}``; ``rss_mb`` is the child's peak RSS from ``wait4`` (pages shared with the parent
included, as ``ps`` counts them).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _child(argv: list[str], out_fd: int, log_path: str, profile: str | None) -> None:
    """The task process: ``tablemgmt run`` as the console script runs it; never returns."""
    rc = 1
    try:
        os.dup2(out_fd, 1)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log_fd, 2)
        sys.argv = ["tablemgmt", *argv]
        from airflow_tablemgmt.cli import main

        if profile:
            import cProfile

            prof = cProfile.Profile()
            rc = prof.runcall(main)
            prof.dump_stats(profile)
        else:
            rc = main()
    except BaseException:  # noqa: BLE001 - the child reports and exits, never returns into the loop
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc if isinstance(rc, int) else 1)


def _result(table: str, wall: float, status: int, usage, stdout, log: str) -> dict:
    stdout.seek(0)
    text = stdout.read().decode(errors="replace")
    stdout.close()
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise SystemExit(f"tablemgmt run {table} (forked) exited {rc}; see {log}\n{text[-2000:]}")
    try:
        summary = json.loads(text).get("summary") or {}
    except ValueError:
        summary = {}
    return {"table": table, "wall": wall, "rss_mb": usage.ru_maxrss / 1024, "summary": summary}


def run(spec: dict) -> dict:
    """Fork one child per table, up to ``parallel`` at once (Airflow's executor runs that many task processes);
    ``elapsed`` is the wall from the first fork to the last child's exit."""
    started = time.perf_counter()
    import airflow_tablemgmt.spark.connect.warm  # noqa: F401 - what airflow_local_settings.py imports

    preimport = time.perf_counter() - started
    out: dict = {"preimport_s": round(preimport, 3), "parent_rss_mb": round(_rss_mb(), 1), "runs": []}
    parallel = max(int(spec.get("parallel") or 1), 1)
    running: dict[int, tuple[str, float, object]] = {}
    todo = list(enumerate(spec["tables"]))
    first = time.perf_counter()
    while todo or running:
        while todo and len(running) < parallel:
            i, table = todo.pop(0)
            argv = [*spec["argv"], table, spec["action"], "--json"]
            profile = str(Path(spec["profile"]) / f"f_{i:04d}.pstats") if spec.get("profile") else None
            stdout = tempfile.TemporaryFile()
            sys.stdout.flush()
            sys.stderr.flush()
            t0 = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                _child(argv, stdout.fileno(), spec["log"], profile)
            running[pid] = (table, t0, stdout)
        pid, status, usage = os.wait4(-1, 0)
        table, t0, stdout = running.pop(pid)
        out["runs"].append(_result(table, time.perf_counter() - t0, status, usage, stdout, spec["log"]))
    out["elapsed"] = time.perf_counter() - first
    out["parallel"] = parallel
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    result = run(spec)
    Path(spec["out"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
