"""A run's ``timings``: the phases the job and the submitting side record, without a JVM."""

from __future__ import annotations

import json
import time

import pytest

from airflow_tablemgmt.spark.launch.submit import SubmitClock
from airflow_tablemgmt.spark.protocol import (
    PHASE_NAMES,
    JobResult,
    Timings,
    current_timings,
    describe_timings,
    failure_line,
    parse_result,
    recording,
    success_line,
    timed,
)


def test_timed_records_into_the_current_run_only() -> None:
    with timed("procedure"):  # no run recording: nothing happens, nothing fails
        pass
    assert current_timings() is None

    timings = Timings()
    with recording(timings):
        assert current_timings() is timings
        with timed("procedure"):
            time.sleep(0.02)
        with timed("procedure"):  # a phase that repeats is summed
            time.sleep(0.02)
    assert current_timings() is None
    assert timings.seconds["procedure"] >= 0.04


def test_a_phase_that_raises_is_still_timed() -> None:
    timings = Timings()
    with recording(timings), pytest.raises(ValueError), timed("metrics_before"):
        raise ValueError("boom")
    assert "metrics_before" in timings.seconds


def test_negative_durations_are_clamped_and_values_rounded() -> None:
    timings = Timings()
    timings.add("jvm_exit", -0.5)
    timings.add("session", 1.23456)
    assert timings.as_dict() == {"jvm_exit": 0.0, "session": 1.235}


def test_describe_timings_lists_phases_in_run_order_then_the_total() -> None:
    line = describe_timings({"total": 9.0, "procedure": 4.0, "session": 2.5, "custom": 0.1})
    assert line == "session 2.50s, procedure 4.00s, custom 0.10s, total 9.00s"
    assert (
        PHASE_NAMES.index("metrics_before")
        < PHASE_NAMES.index("procedure")
        < PHASE_NAMES.index("metrics_after")
    )


def _clocked(result_line: str, *, launch_delay: float = 0.0) -> tuple[SubmitClock, JobResult]:
    clock = SubmitClock()
    time.sleep(0.01)
    clock.launch()
    clock.line("some spark log line")
    clock.line(result_line)
    time.sleep(0.01)
    clock.exit()
    return clock, parse_result([result_line])


def test_submit_clock_completes_a_success_summary() -> None:
    line = success_line(
        "rewrite-files",
        "lake.db.t",
        {"timings": {"procedure": 3.0}},
        # The driver JVM started well after the launch (far enough ahead that a slow machine's
        # delay before the launch cannot reach it).
        jvm_started_at=time.time() + 30,
    )
    clock, result = _clocked(line)

    timings = clock.complete(result, 0.002)

    assert result.summary["timings"] is timings
    assert timings["procedure"] == 3.0  # the job's own phases are kept
    assert timings["hook_setup"] >= 0.01
    assert 20 <= timings["spark_submit"] <= 30
    assert timings["jvm_exit"] >= 0.01
    assert timings["result_parse"] == 0.002
    # Each figure is rounded to the millisecond on its own.
    assert timings["total"] >= timings["hook_setup"] + timings["jvm_exit"] - 0.002


def test_submit_clock_keeps_a_failure_summary_empty_and_skips_another_hosts_clock() -> None:
    line = failure_line(
        "expire-snapshots", "lake.db.t", "TableNotFound", "missing", timings={"table_load": 0.3}
    )
    payload = json.loads(line)
    payload["jvm_started_at"] = time.time() - 3600  # a driver on another host with its own clock
    clock, result = _clocked(json.dumps(payload))

    timings = clock.complete(result, 0.0)

    assert result.summary == {}  # a failure has no summary to carry them
    assert result.raw["timings"] is timings
    assert timings["table_load"] == 0.3
    assert "spark_submit" not in timings  # negative: not this host's clock, so not reported


def test_result_lines_carry_timings_and_the_jvm_start() -> None:
    ok = json.loads(success_line("a", "c.n.t", {"x": 1}, jvm_started_at=1700000000.12345))
    assert ok["jvm_started_at"] == 1700000000.123
    assert "jvm_started_at" not in json.loads(success_line("a", "c.n.t", {}))
    failed = json.loads(failure_line("a", "c.n.t", "E", "m", timings={"session": 1.0}))
    assert failed["timings"] == {"session": 1.0}
    assert "timings" not in json.loads(failure_line("a", "c.n.t", "E", "m"))
