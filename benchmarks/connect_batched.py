"""Ways (B) and (P) of ``connect_throughput.py``: a planned DAG's mapped batch on the Connect engine (issue 40).

The path a ``run_batch`` task takes in a deployment: a parent process imports
``airflow_tablemgmt.spark.connect.warm`` (what ``airflow_local_settings.py`` imports, as for way (f)) and the
planned DAG's operator, then forks one child per batch, which runs ``RunBatchOperator.execute`` (the mapped
task's own code: ``services/batches.py``'s ``run_batch`` with ``services/batch_wiring.py``'s real parts: each
table's runner on the Connect engine, its time limit, the snapshot gate, the health gate inside the lifecycle,
and after each table its health measured again and stored, and the ``unhealthy`` check) with a context
holding what the operator reads of Airflow's (the task instance's ids, the run's logical date). The tables of
a batch share the child's warm Connect client; each has its own process row and lease.

It runs as a process of its own, started by the benchmark (whose gRPC channel must not cross a fork).

    python benchmarks/connect_batched.py SPEC.json

SPEC: ``{"batches": [[table ids]], "policy", "action", "dag_id", "out", "log", "parallel"}``. The result:
``{"preimport_s", "elapsed", "parallel", "runs": [{"batch", "tables", "wall", "rss_mb", "cpu_s", "counts",
"error", "imports_s", "execute_s", "gc_s"}]}`` (``imports_s``: fork to ``execute``, the task code's first imports);
``rss_mb`` is the child's peak RSS from ``wait4``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace


def _child(spec: dict, index: int, batch: list[str], instant: datetime, out_fd: int) -> None:
    """The mapped task's process: ``RunBatchOperator.execute`` for one batch; never returns."""
    rc = 1
    forked = time.perf_counter()
    try:
        log_fd = os.open(spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        import faulthandler
        import logging
        import signal

        logging.basicConfig(
            level=logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s.%(msecs)03d %(threadName)s %(name)s %(message)s",
            datefmt="%H:%M:%S",
        )
        # a batch that hangs says where: every thread's stack on SIGUSR1, and on its own after 15 minutes
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        faulthandler.dump_traceback_later(900, exit=True)
        # What execute imports on its first call (the operator's imports are lazy), timed apart: once per batch
        import airflow_tablemgmt.hooks.tablemgmt  # noqa: F401
        import airflow_tablemgmt.operators.maintenance  # noqa: F401
        import airflow_tablemgmt.services.batch_wiring  # noqa: F401
        import airflow_tablemgmt.services.batches  # noqa: F401

        # (OpenLineage's Spark helpers only with [openlineage] spark_inject_parent_job_info on: not here)
        from airflow_tablemgmt.dag_factory.plan import BATCH_TASK, RunBatchOperator

        imported = time.perf_counter() - forked
        gc_pauses = _gc_pauses()
        _sample_with_py_spy(index)

        ti = SimpleNamespace(
            dag_id=spec["dag_id"],
            run_id=f"bench__{instant.isoformat()}",
            task_id=BATCH_TASK,
            map_index=index,
            try_number=1,
        )
        context = {"ti": ti, "logical_date": instant, "dag_run": SimpleNamespace(run_after=instant, conf={})}
        op = RunBatchOperator(task_id=BATCH_TASK, batch=batch, policy=spec["policy"], action=spec["action"])
        result, error = None, None
        t0 = time.perf_counter()
        logging.getLogger("tablemgmt.bench").info("execute: %d tables", len(batch))
        imported_before = set(sys.modules)
        try:
            result = op.execute(context)
        except Exception as e:  # noqa: BLE001 - a failed table fails the task at the end: reported
            error = f"{type(e).__name__}: {e}"
        logging.getLogger("tablemgmt.bench").info(
            "execute returned; modules it imported (warm.py's MODULES could hold them): %s",
            sorted(set(sys.modules) - imported_before),
        )
        doc = {
            "result": result,
            "error": error,
            "imports_s": imported,
            "execute_s": time.perf_counter() - t0,
            "gc_s": {str(g): round(v, 3) for g, v in gc_pauses.items()},
        }
        os.write(out_fd, json.dumps(doc).encode())
        rc = 0
    except BaseException:  # noqa: BLE001 - the child reports and exits, never returns into the loop
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def _sample_with_py_spy(index: int) -> None:
    """With ``TABLEMGMT_BATCH_PY_SPY=<dir>``: ``py-spy record`` samples this batch's process (every thread, on
    holding the GIL: its Python CPU; without pausing it) into ``<dir>/batch-<pid>-<index>.txt`` (collapsed stacks), until the process exits.
    ``TABLEMGMT_PY_SPY`` names the ``py-spy`` executable (not one of the project's dependencies)."""
    out = os.environ.get("TABLEMGMT_BATCH_PY_SPY")
    if not out:
        return
    import subprocess

    exe = os.environ.get("TABLEMGMT_PY_SPY", "py-spy")
    target = Path(out) / f"batch-{os.getpid()}-{index}.txt"
    cmd = [exe, "record", "--pid", str(os.getpid()), "--format", "raw", "--rate", "200", "--nonblocking"]
    cmd += os.environ.get("TABLEMGMT_PY_SPY_ARGS", "--gil").split()
    cmd += ["-o", str(target)]
    subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(1.0)  # py-spy attaches


def _gc_pauses() -> dict[int, float]:
    """Seconds Python's cycle collector spends per generation from now on, in every thread of the process."""
    import gc

    spent: dict[int, float] = {0: 0.0, 1: 0.0, 2: 0.0}
    began: dict[str, float] = {}

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            began["t"] = time.perf_counter()
        elif "t" in began:
            spent[info["generation"]] += time.perf_counter() - began.pop("t")

    gc.callbacks.append(callback)
    return spent


def run(spec: dict) -> dict:
    """Fork one child per batch, up to ``parallel`` at once; ``elapsed`` is the wall from the first fork to
    the last child's exit."""
    started = time.perf_counter()
    import airflow_tablemgmt.spark.connect.warm  # noqa: F401 - what airflow_local_settings.py imports
    from airflow_tablemgmt.dag_factory.plan import RunBatchOperator  # noqa: F401 - the DAG file's import

    out: dict = {"preimport_s": round(time.perf_counter() - started, 3), "runs": []}
    # As Airflow's LocalExecutor does before it forks its workers (``_spawn_workers_with_gc_freeze``), whose
    # task processes are forked from them in turn: what the parent imported is left out of the children's
    # cycle collections (without it a batch's full collection walked the whole pre-imported heap: 0.6 s of a
    # 25-table batch's CPU in one run, none in the next)
    import gc

    gc.freeze()
    parallel = max(int(spec.get("parallel") or 1), 1)
    instant = datetime.now(UTC)  # one DAG run: every batch's processes at its instant
    running: dict[int, tuple[int, list[str], float, object]] = {}
    todo = list(enumerate(spec["batches"]))
    first = time.perf_counter()
    while todo or running:
        while todo and len(running) < parallel:
            index, batch = todo.pop(0)
            result_file = tempfile.TemporaryFile()
            sys.stdout.flush()
            sys.stderr.flush()
            t0 = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                _child(spec, index, batch, instant, result_file.fileno())
            running[pid] = (index, batch, t0, result_file)
        pid, status, usage = os.wait4(-1, 0)
        index, batch, t0, result_file = running.pop(pid)
        wall = time.perf_counter() - t0
        result_file.seek(0)  # type: ignore[attr-defined]
        text = result_file.read().decode(errors="replace")  # type: ignore[attr-defined]
        result_file.close()  # type: ignore[attr-defined]
        rc = os.waitstatus_to_exitcode(status)
        if rc != 0 or not text:
            raise SystemExit(f"batch {index} exited {rc}; see {spec['log']}")
        doc = json.loads(text)
        counts = (doc["result"] or {}).get("counts") or {}
        out["runs"].append(
            {
                "batch": index,
                "tables": len(batch),
                "wall": wall,
                "rss_mb": usage.ru_maxrss / 1024,
                # the task process (all its threads) and the children it waited for
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "counts": counts,
                "error": doc["error"],
                "imports_s": doc["imports_s"],
                "execute_s": doc["execute_s"],
                "gc_s": doc.get("gc_s"),
            }
        )
    out["elapsed"] = time.perf_counter() - first
    out["parallel"] = parallel
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    result = run(spec)
    Path(spec["out"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
