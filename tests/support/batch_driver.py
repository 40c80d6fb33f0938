"""A stand-in ``spark-submit`` for a batch's one driver, without a JVM: it runs the real driver loop
(``spark/job/batch.py``: slots, each table's own lease guard and fence, one result line per table) with a
stand-in job instead of Spark's. What a table's job does follows its name: ``*fails*`` fails, ``*slow*``
sleeps 30 s (to be killed, or to outlive its lease), anything else succeeds. Each result's summary carries
the driver's pid, so a test sees which tables shared a driver."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import Any


def install(tmp_path: Path) -> Path:
    """Write the stand-in as an executable ``spark-submit`` in ``tmp_path``; its path."""
    script = tmp_path / "spark-submit"
    repo = Path(__file__).resolve().parents[2]
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(repo)!r})\n"
        "from tests.support.batch_driver import main\nmain()\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


class _Outcome:
    def __init__(self, line: str) -> None:
        self._line = line

    def line(self, timings: Any) -> str:
        return self._line


def _execute(job: Any, spark: Any, timings: Any, background: Any) -> _Outcome:
    from airflow_tablemgmt.spark.job import lease_guard
    from airflow_tablemgmt.spark.protocol import failure_line, success_line

    name = job.table["name"]
    table = f"{job.table['catalog']}.{job.table['namespace']}.{name}"
    if "slow" in name:
        time.sleep(30)
    if "fails" in name:
        return _Outcome(failure_line(job.action, table, "StandInFailure", f"the stand-in job failed {name}"))
    try:
        lease_guard.fence(f"{job.action} on {table}")
    except lease_guard.LeaseNotConfirmed as e:
        return _Outcome(failure_line(job.action, table, "LeaseNotConfirmed", str(e)))
    summary = {"driver_pid": os.getpid(), "process_id": job.process_id, "rewritten_data_files_count": 8}
    return _Outcome(success_line(job.action, table, summary, duration_seconds=0.01))


def main() -> None:
    import json

    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.spark.job.batch import run_batch_dir

    args = sys.argv[1:]
    root = Path(args[args.index("--batch") + 1])
    print(f"INFO SparkContext: spark application local-{os.getpid()}", flush=True)
    with open(root.parent / "drivers.log", "a") as out:  # noqa: PTH123 - one line per driver started
        out.write(f"{os.getpid()}\n")

    def load(path: Path) -> JobSpec:
        return JobSpec(**json.loads(path.read_text()))

    sys.exit(run_batch_dir(root, execute=_execute, load_spec=load))
