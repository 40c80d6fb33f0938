"""Metrics go through Airflow's own Stats: a real UDP socket stands in for the StatsD daemon."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from airflow_tablemgmt import observability
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.metadata.health import score


class StatsdReceiver:
    """A UDP socket that collects StatsD lines (``name:value|type``)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(5.0)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []

    def wait_for(self, *names: str, timeout: float = 5.0) -> dict[str, list[str]]:
        """Read until every name in ``names`` arrived (bounded); returns name -> [value|type, ...]."""
        self.sock.settimeout(timeout)
        while not all(any(line.split(":")[0] == n for line in self.lines) for n in names):
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                break
            self.lines.extend(data.decode().splitlines())
        return self.by_name()

    def by_name(self) -> dict[str, list[str]]:
        """name -> ["<value>|<type>", ...], values normalized (StatsD timers arrive as ``250.000000``)."""
        out: dict[str, list[str]] = {}
        for line in self.lines:
            name, _, rest = line.partition(":")
            value, _, kind = rest.partition("|")
            number = float(value)
            shown = str(int(number)) if number.is_integer() else str(number)
            out.setdefault(name, []).append(f"{shown}|{kind}")
        return out

    def expect(self, expected: dict[str, list[str]]) -> dict[str, list[str]]:
        """Wait until every expected name arrived, then compare them all."""
        got = self.wait_for(*expected)
        assert {n: got.get(n) for n in expected} == expected
        return got


@pytest.fixture
def statsd(monkeypatch: pytest.MonkeyPatch) -> Iterator[StatsdReceiver]:
    try:
        import statsd as _client  # noqa: F401 - Airflow's StatsD backend needs it
    except ImportError:
        pytest.fail("the StatsD client is missing: install the dev extra (statsd, as apache-airflow[statsd])")
    receiver = StatsdReceiver()
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(receiver.port))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
    observability.reset()  # Stats reads the configuration on first use
    yield receiver
    receiver.sock.close()
    monkeypatch.delenv("AIRFLOW__METRICS__STATSD_ON")
    observability.reset()


def _process(action: str = "rewrite-files", status: ProcessStatus = ProcessStatus.SUCCESS) -> Process:
    now = datetime(2026, 2, 1, tzinfo=UTC)
    return Process(
        id=7,
        table_id="demo.db.events",
        action=action,
        instant=now,
        status=status,
        attempt=1,
        summary={
            "rewritten_bytes_count": 123456,
            "before": {"data_files": 520, "delete_files": 3, "snapshots": 9, "data_bytes": 900},
            "after": {"data_files": 4, "delete_files": 0, "snapshots": 10, "data_bytes": 800},
        },
    )


def test_process_lifecycle_metrics_arrive_with_per_action_names(statsd: StatsdReceiver) -> None:
    p = _process()
    observability.process_started(p)
    observability.process_finished(p, duration_s=2.5)
    got = statsd.expect(
        {
            "airflow.tablemgmt.process.started": ["1|c"],
            "airflow.tablemgmt.process.started.rewrite-files": ["1|c"],
            "airflow.tablemgmt.process.succeeded": ["1|c"],
            "airflow.tablemgmt.process.succeeded.rewrite-files": ["1|c"],
            "airflow.tablemgmt.process.duration": ["2500|ms"],
            "airflow.tablemgmt.process.duration.rewrite-files.success": ["2500|ms"],
            "airflow.tablemgmt.process.files_before.demo__db__events.rewrite-files": ["520|g"],
            "airflow.tablemgmt.process.files_after.demo__db__events.rewrite-files": ["4|g"],
            "airflow.tablemgmt.process.bytes_rewritten.rewrite-files": ["123456|c"],
            # The after-figures double as the table's health gauges.
            "airflow.tablemgmt.table.data_files.demo__db__events": ["4|g"],
            "airflow.tablemgmt.table.delete_files.demo__db__events": ["0|g"],
            "airflow.tablemgmt.table.snapshots.demo__db__events": ["10|g"],
        }
    )
    assert not any(".failed" in n for n in got)


def test_failed_canceled_and_lease_wait(statsd: StatsdReceiver) -> None:
    observability.process_finished(_process("expire-snapshots", ProcessStatus.FAILED), duration_s=0.25)
    observability.process_finished(_process("delete-orphans", ProcessStatus.CANCELED), duration_s=1)
    observability.lease_wait("demo.db.events", "rewrite-files")
    observability.lease_waited("demo.db.events", "rewrite-files", waited_s=30)
    got = statsd.expect(
        {
            "airflow.tablemgmt.process.failed.expire-snapshots": ["1|c"],
            "airflow.tablemgmt.process.duration.expire-snapshots.failed": ["250|ms"],
            "airflow.tablemgmt.process.canceled.delete-orphans": ["1|c"],
            "airflow.tablemgmt.process.duration.delete-orphans.canceled": ["1000|ms"],
            "airflow.tablemgmt.lease.waits": ["1|c"],
            "airflow.tablemgmt.lease.waits.rewrite-files": ["1|c"],
            "airflow.tablemgmt.lease.wait_duration.rewrite-files": ["30000|ms"],
        }
    )
    # A run that did not succeed measured nothing: no file gauges from its summary.
    assert not any(
        n.startswith(("airflow.tablemgmt.process.files_", "airflow.tablemgmt.table.")) for n in got
    )


def test_health_gauges(statsd: StatsdReceiver) -> None:
    files = FileStats(
        snapshot_id=3924933435076606422,
        snapshots=12,
        data_files=40,
        small_data_files=30,
        small_file_threshold_bytes=100,
        delete_files=2,
        data_bytes=4096,
        delete_bytes=10,
        records=99,
    )
    observability.table_health("demo.db.events", files)
    statsd.expect(
        {
            "airflow.tablemgmt.table.data_files": ["40|g"],  # the tagged name, too
            "airflow.tablemgmt.table.data_files.demo__db__events": ["40|g"],
            "airflow.tablemgmt.table.small_data_files.demo__db__events": ["30|g"],
            "airflow.tablemgmt.table.small_file_ratio.demo__db__events": ["0.75|g"],
            "airflow.tablemgmt.table.delete_files.demo__db__events": ["2|g"],
            "airflow.tablemgmt.table.snapshots.demo__db__events": ["12|g"],
            "airflow.tablemgmt.table.data_bytes.demo__db__events": ["4096|g"],
            # The score REST and the page show, from the same figures (metadata/health.py).
            "airflow.tablemgmt.table.health_score.demo__db__events": [f"{score(files).score}|g"],
        }
    )
    assert score(files).score < 100  # 30 small files of 40: a finding, so the gauge says so


def test_an_emit_that_raises_never_reaches_the_caller(
    statsd: StatsdReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.observability import stats

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("statsd is down")

    monkeypatch.setattr(stats, "incr", broken)
    monkeypatch.setattr(stats, "gauge", broken)
    monkeypatch.setattr(stats, "timing", broken)
    p = _process()
    observability.process_started(p)  # nothing raised
    observability.process_finished(p, duration_s=1)
    observability.lease_wait("demo.db.events", "rewrite-files")
    observability.table_health("demo.db.events", None)


def test_without_statsd_nothing_is_sent_and_nothing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "False")
    observability.reset()
    observability.process_started(_process())
    observability.process_finished(_process(), duration_s=1)


def test_a_runs_cost_goes_out_whatever_its_status(statsd: StatsdReceiver) -> None:
    ok = _process()
    ok.core_seconds, ok.cpu_seconds, ok.bytes_read, ok.bytes_written = 12.5, 8.0, 4096, 2048
    failed = _process("rewrite-deletes", ProcessStatus.FAILED)
    failed.core_seconds, failed.cpu_seconds, failed.bytes_read, failed.bytes_written = 2.0, 1.5, 100, 0
    observability.process_finished(ok, duration_s=30)
    observability.process_finished(failed, duration_s=3)
    observability.process_finished(_process("expire-snapshots"), duration_s=1)  # not measured: no cost sent
    got = statsd.expect(
        {
            "airflow.tablemgmt.process.core_time.rewrite-files.success": ["12500|ms"],
            "airflow.tablemgmt.process.cpu_time.rewrite-files.success": ["8000|ms"],
            "airflow.tablemgmt.process.bytes_read.rewrite-files": ["4096|c"],
            "airflow.tablemgmt.process.bytes_written.rewrite-files": ["2048|c"],
            "airflow.tablemgmt.process.core_time.rewrite-deletes.failed": ["2000|ms"],
            "airflow.tablemgmt.process.bytes_read.rewrite-deletes": ["100|c"],
            "airflow.tablemgmt.process.core_time": ["12500|ms", "2000|ms"],  # the tagged name
        }
    )
    assert not any(n.startswith("airflow.tablemgmt.process.core_time.expire-snapshots") for n in got)
