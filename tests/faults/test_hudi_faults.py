"""Hudi faults (issue 27): kill -9 of the Spark driver during a compaction, then the retry (the concurrent
writer during each mutating Hudi action: ``test_format_concurrent_writers.py``). On demand (``TABLEMGMT_FORMATS_FULL=1``): each round is two
Hudi JVMs, ≈ 2-4 min on 2 cores.

kill -9: a child process writes a merge-on-read table and runs the factory's compaction job (schedule an
instant, then execute it); the test kills its driver JVM with SIGKILL when the timeline shows the instant
requested (``[requested]``: between the two phases, or as soon after as the poll sees it) or inflight
(``[inflight]``: while executing). A second child runs the retry the factory makes (``recover``): it must execute the
instant the dead attempt scheduled -- no second compaction instant on the timeline, none left pending --
and the table must read back with the same rows and checksum.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.formats.hudi.metadata import read_timeline
from tests.faults.conftest import ROUNDS, Figures
from tests.integration.formats.format_jobs import STEP, run_scenario

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_FORMATS_FULL") != "1",
        reason="the Hudi fault scenarios run with TABLEMGMT_FORMATS_FULL=1",
    ),
]
ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "tests.integration.formats.format_faults_scenario"


def driver_jvms(pid: int) -> list[int]:
    """The Java processes among ``pid``'s descendants: the driver pyspark started (through spark-submit)."""
    found, stack = [], [pid]
    while stack:
        out = subprocess.run(["pgrep", "-P", str(stack.pop())], capture_output=True, text=True).stdout
        for child in map(int, out.split()):
            stack.append(child)
            try:
                if b"java" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]:
                    found.append(child)
            except OSError:
                continue
    return found


def steps_of(stdout: str) -> dict[str, dict[str, Any]]:
    steps = {}
    for line in stdout.splitlines():
        if line.startswith(STEP):
            data = json.loads(line[len(STEP) :])
            steps[data.pop("step")] = data
    return steps


def compaction_instants(timeline_dir: Path, state: str) -> list[str]:
    return sorted(n.split(".")[0] for n in os.listdir(timeline_dir) if n.endswith(f".compaction.{state}"))


def kill_driver_during_compaction(warehouse: Path, at: str) -> dict[str, Any]:
    """Run the compaction child; SIGKILL its driver JVM once an instant is ``at`` (requested/inflight)."""
    timeline = warehouse / "app" / "events" / ".hoodie" / "timeline"
    warehouse.mkdir(parents=True, exist_ok=True)
    log = (warehouse.parent / f"{warehouse.name}-compact.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", SCENARIO, str(warehouse), "hudi-compact"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,
    )
    killed_at: list[str] = []
    deadline = time.monotonic() + 900
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if timeline.is_dir() and compaction_instants(timeline, at):
                killed_at = compaction_instants(timeline, "requested")
                jvms = driver_jvms(proc.pid)
                assert jvms, "no driver JVM found under the child"
                for pid in jvms:
                    os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        try:
            stdout, _ = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:  # the Python side hung on its dead gateway: the host goes too
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, _ = proc.communicate()
        log.close()
    steps = steps_of(stdout)
    return {
        "steps": steps,
        "killed_at": killed_at,
        "inflight_at_kill": compaction_instants(timeline, "inflight"),
        "completed": (steps.get("compaction_done") or {}).get("result", {}).get("exit_code") == 0,
        "stderr": (warehouse.parent / f"{warehouse.name}-compact.log").read_text()[-3000:],
    }


@pytest.mark.parametrize("at", ["requested", "inflight"])
def test_kill9_of_the_driver_during_compaction_then_the_retry_executes_the_scheduled_instant(
    at: str, tmp_path: Path, figures: Figures
) -> None:
    for round_ in range(max(1, ROUNDS // 2)):  # TABLEMGMT_FAULT_ROUNDS in all, split between the kill points
        warehouse = tmp_path / f"round{round_}"
        killed = kill_driver_during_compaction(warehouse, at)
        assert killed["killed_at"], (
            f"round {round_}: no compaction instant appeared before the child ended:\n{killed['stderr']}"
        )
        assert not killed["completed"], f"round {round_}: the job finished before the kill"
        (instant,) = killed["killed_at"]
        before = killed["steps"]["before"]["read"]
        retry = run_scenario(SCENARIO, warehouse, "hudi-recover", timeout=900)["retry"]
        result, read = retry["result"], retry["read"]
        assert result["exit_code"] == 0, result
        assert retry["job"]["options"]["compaction-instant"] == instant
        assert (
            result["summary"]["executed_instant"] == instant
            and result["summary"]["scheduled_instant"] is None
        )
        timeline = read_timeline(str(warehouse / "app" / "events"))
        requested = compaction_instants(warehouse / "app" / "events" / ".hoodie" / "timeline", "requested")
        duplicates = len(requested) - 1
        figures.rows_lost += max(0, before["rows"] - read["rows"])
        figures.rows_duplicated += max(0, read["rows"] - read["ids"])
        figures.concurrent_jobs += duplicates
        figures.rounds += 1
        figures.notes[f"round{round_}"] = {
            "killed_when": at,
            "instant": instant,
            "inflight_at_kill": killed["inflight_at_kill"],
            "retry_wall_s": result.get("duration_seconds"),
        }
        assert requested == [instant] and timeline.completed_compactions() == [instant]
        assert timeline.pending_compactions() == []
        assert (read["rows"], read["checksum"]) == (before["rows"], before["checksum"])
    assert figures.rows_lost == figures.rows_duplicated == figures.concurrent_jobs == 0
