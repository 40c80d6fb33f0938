"""Issue 36, item 1: the job's own deadline on the lease (``spark/job/lease_guard.py``), fed by the
worker's renewals (``lifecycle/beat.py`` -> ``ConfirmsLease``). A driver stand-in is a real process
running the real guard: it must stop itself once the confirmation runs out, and only then."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.lifecycle import ConfirmsLease, RunRequest
from airflow_tablemgmt.spark.job import lease_guard
from airflow_tablemgmt.spark.protocol import JobResult
from tests.unit.lifecycle.stand_ins import ACTION, TABLE, StandInSubmitter, instant, make_store, runner

DRIVER = """
import sys, time
from pathlib import Path
from airflow_tablemgmt.spark.job import lease_guard
guard = lease_guard.start_beside(Path(sys.argv[1]))
print("guard" if guard else "no guard", flush=True)
time.sleep(float(sys.argv[2]))
print("ran to the end", flush=True)
"""


def _driver(spec: Path, run_for: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(spec), str(run_for)], stdout=subprocess.PIPE, text=True
    )


def test_a_driver_whose_lease_is_not_confirmed_stops_itself(tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    # 4 s: the interpreter's start under load is well inside it; then nobody renews
    lease_guard.confirm(
        spec.with_name(lease_guard.LEASE_FILE), sent_monotonic=time.monotonic(), valid_for=4.0
    )
    started = time.monotonic()
    proc = _driver(spec, 60)
    out, _ = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == lease_guard.EXIT_CODE and out.strip() == "guard"
    assert 3.9 < took < 15, took
    # the worker's failure reason says the guard stopped it (its stderr dies with the killed JVM)
    from airflow_tablemgmt.hooks.spark_failure import guard_stop_reason

    reason = guard_stop_reason(spec)
    assert reason is not None and reason.startswith("the lease guard stopped the Spark driver: "), reason
    assert "past the lease confirmation" in reason


def test_a_driver_whose_lease_is_confirmed_runs_on(tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    path = spec.with_name(lease_guard.LEASE_FILE)
    lease_guard.confirm(path, sent_monotonic=time.monotonic(), valid_for=4.0)
    stop = threading.Event()

    def worker_renews() -> None:
        while not stop.wait(0.2):
            lease_guard.confirm(path, sent_monotonic=time.monotonic(), valid_for=0.6)

    beat = threading.Thread(target=worker_renews, daemon=True)
    beat.start()
    try:
        proc = _driver(spec, 5)
        out, _ = proc.communicate(timeout=60)
    finally:
        stop.set()
    assert proc.returncode == 0 and out.split() == ["guard", "ran", "to", "the", "end"]


def test_without_a_confirmation_there_is_no_guard(tmp_path: Path) -> None:
    proc = _driver(tmp_path / "job.json", 0.1)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.splitlines()[0] == "no guard"


def test_the_fence_refuses_a_commit_after_the_confirmation_ran_out(tmp_path: Path) -> None:
    path = tmp_path / lease_guard.LEASE_FILE
    lease_guard.confirm(path, sent_monotonic=time.monotonic(), valid_for=0.2)
    guard = lease_guard.LeaseGuard(path, lease_guard.read(path))  # not started: the fence alone
    guard.fence("the commit")
    time.sleep(0.3)
    with pytest.raises(lease_guard.LeaseNotConfirmed, match="before the commit"):
        guard.fence("the commit")


class Confirming(StandInSubmitter):
    """Records the confirmations the runner gives its job."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.confirmed: list[tuple[float, float]] = []

    def confirm_lease(self, sent_monotonic: float, valid_for: float) -> None:
        self.confirmed.append((sent_monotonic, valid_for))

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.at_submit = len(self.confirmed)
        return super().submit(job, on_started)


def test_the_heartbeat_confirms_each_renewal_to_the_job(tmp_path: Path) -> None:
    from datetime import timedelta

    store = make_store(tmp_path)
    hold = threading.Event()
    sub = Confirming(hold=hold)
    assert isinstance(sub, ConfirmsLease)
    run = runner(
        store,
        sub,
        tmp_path,
        heartbeat_every=timedelta(milliseconds=100),
        lease_ttl=timedelta(seconds=1),
        stale_after=timedelta(milliseconds=500),
    )
    threading.Timer(0.8, hold.set).start()
    outcome = run.run(RunRequest(TABLE, ACTION, instant(3)))
    assert outcome.process.status == S.SUCCESS
    assert sub.at_submit == 1  # confirmed before the job started
    assert len(sub.confirmed) >= 4  # and on the renewals while it ran
    sents = [s for s, _ in sub.confirmed]
    assert sents == sorted(sents) and {v for _, v in sub.confirmed} == {0.9}  # lease_ttl - heartbeat_every
