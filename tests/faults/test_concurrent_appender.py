"""A writer keeps appending while every mutating action runs: no committed row is lost or duplicated.

One in-process Spark session (local[2], Iceberg hadoop catalog ``flt``) runs the maintainer function
of each action in the test thread while an appender thread commits small batches to the same table
through the same session (Iceberg's in-JVM commit lock is what a shared hadoop warehouse relies on).
After each action, the table's ids must be exactly: the base rows (minus the ones the action is meant
to delete) plus every batch the appender committed — none lost, none duplicated, none resurrected.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.formats.iceberg.job import MAINTAINERS
from airflow_tablemgmt.spark.job import literals
from tests.faults.conftest import ROUNDS, Figures
from tests.integration.iceberg_session import start_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.faults

CATALOG = "flt"
TABLE = TableIdentifier(CATALOG, "db", "appends")
NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=10)  # expire-data (retention 1d) deletes these
RECENT = NOW - timedelta(hours=1)
BASE_OLD, BASE_NEW = range(0, 600), range(600, 1800)
DELETED = {i for i in (*BASE_OLD, *BASE_NEW) if i % 7 == 0}  # position deletes written at set-up
BATCH = 40
# One round is 6 Spark actions with a writer beside each (~1 min on a quiet 2-core machine): half the rounds.
ROUNDS_HERE = max(1, ROUNDS // 2)

# (action, options): each as aggressive as its floors allow, or past them with the logged override.
ACTIONS: list[tuple[str, dict[str, Any]]] = [
    ("rewrite-deletes", {"min-input-files": 1, "rewrite-all": True}),
    ("rewrite-files", {"min-input-files": 2, "rewrite-all": True}),
    ("rewrite-manifests", {}),
    ("expire-snapshots", {"older-than": "1s", "retain-last": 1, "allow-below-floor": True}),
    ("delete-orphans", {"older-than": "24h"}),
    ("expire-data", {"column": "ts", "retention": "1d", "confirm": True}),
]


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    warehouse = tmp_path_factory.mktemp("appender-wh")
    session, created = start_spark(CatalogSpec(name=CATALOG, warehouse=str(warehouse)))
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS `{CATALOG}`.`db`")
    yield session
    if created:
        session.stop()


def _rows(ids: range, ts: datetime, parts: int) -> str:
    return (
        f"SELECT /*+ REPARTITION({parts}) */ id, {literals.timestamp(ts)} AS ts, concat('v', id) AS v "
        f"FROM range({ids.start}, {ids.stop})"
    )


def create_table(spark: SparkSession) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {TABLE.quoted}")
    spark.sql(
        f"CREATE TABLE {TABLE.quoted} (id BIGINT, ts TIMESTAMP, v STRING) USING iceberg "
        "PARTITIONED BY (days(ts)) TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none', "
        "'write.delete.mode'='merge-on-read', 'write.delete.granularity'='file')"
    )
    for ids, ts in ((BASE_OLD, OLD), (BASE_NEW, RECENT)):
        for chunk in range(3):  # several commits of several small files each
            step = len(ids) // 3
            part = range(ids.start + chunk * step, ids.start + (chunk + 1) * step)
            spark.sql(f"INSERT INTO {TABLE.quoted} {_rows(part, ts, 3)}")
    for k in range(3):  # separate delete commits: several position delete files to rewrite
        spark.sql(f"DELETE FROM {TABLE.quoted} WHERE id % 7 = 0 AND id % 3 = {k}")


class Appender:
    """Commits ``BATCH`` new rows at a time until stopped; remembers which batches committed and when."""

    def __init__(self, spark: SparkSession, first_id: int) -> None:
        self.spark = spark
        self.next_id = first_id
        self.committed: list[tuple[range, float]] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Appender:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)

    def wait_for_commits(self, n: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while len(self.committed) < n:
            assert time.monotonic() < deadline, f"the appender committed {len(self.committed)} < {n}"
            assert not self.failures or len(self.failures) < 5, self.failures
            time.sleep(0.05)

    def ids(self) -> set[int]:
        return {i for batch, _ in self.committed for i in batch}

    def _run(self) -> None:
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", "appender")
        while not self._stop.is_set():
            batch = range(self.next_id, self.next_id + BATCH)
            self.next_id += BATCH
            try:
                self.spark.sql(f"INSERT INTO {TABLE.quoted} {_rows(batch, NOW, 1)}")
            except Exception as e:  # noqa: BLE001 - a conflict that Iceberg gave up on: not committed
                self.failures.append(f"{type(e).__name__}: {str(e)[:300]}")
                continue
            self.committed.append((batch, time.monotonic()))
            self._stop.wait(0.25)  # pace the writer: leave the action's Spark jobs some of the 2 cores


OVERLAP_TRIES = 8
OVERLAP_SHIFT_S = 0.1


def live_ids(spark: SparkSession) -> list[int]:
    return [int(r.id) for r in spark.sql(f"SELECT id FROM {TABLE.quoted}").collect()]


@pytest.mark.timeout(300 + 300 * ROUNDS_HERE)
def test_no_committed_row_is_lost_while_maintenance_runs(spark: SparkSession, figures: Figures) -> None:
    create_table(spark)
    expected = {i for i in (*BASE_OLD, *BASE_NEW) if i not in DELETED}
    assert sorted(live_ids(spark)) == sorted(expected)
    overlapping: dict[str, int] = {}
    batches = itertools.count()
    for r in range(ROUNDS_HERE):
        for action, options in ACTIONS:
            # A fast action (expire-data takes well under a second) can finish between two appends;
            # run it again (at most OVERLAP_TRIES times) until a committed append lands while it runs,
            # each try starting a little later after an append's commit (its phase in the writer's cycle).
            for attempt in range(OVERLAP_TRIES):
                with Appender(spark, 10_000_000 + next(batches) * 100_000) as appender:
                    appender.wait_for_commits(1)  # the writer is under way before the action starts
                    time.sleep(attempt * OVERLAP_SHIFT_S)
                    started = time.monotonic()
                    summary = MAINTAINERS[action](spark, TABLE, dict(options))
                    ended = time.monotonic()
                    appender.wait_for_commits(len(appender.committed) + 1)  # and commits after it, too
                overlapping[action] = overlapping.get(action, 0) + sum(
                    1 for _, at in appender.committed if started < at < ended
                )
                if action == "expire-data":
                    assert not summary.get("dry_run"), summary
                    expected -= set(BASE_OLD)
                expected |= appender.ids()
                ids = live_ids(spark)
                lost = expected - set(ids)
                figures.rows_lost += len(lost)
                figures.rows_duplicated += len(ids) - len(set(ids))
                resurrected = set(ids) - expected
                print(
                    f"round {r} {action}: {len(appender.committed)} appends ({overlapping[action]} during), "
                    f"{len(appender.failures)} gave up; lost {len(lost)}, duplicated {len(ids) - len(set(ids))}"
                )
                assert not lost, f"{action}: {len(lost)} committed rows lost, e.g. {sorted(lost)[:10]}"
                assert len(ids) == len(set(ids)), f"{action}: duplicated rows"
                assert not resurrected, f"{action}: rows back from the dead: {sorted(resurrected)[:10]}"
                if overlapping[action] >= 1:
                    break
        figures.rounds += 1
    figures.notes = {"appends_during_action": overlapping}
    # Every action overlapped with at least one committed append in some round (else this proved little).
    assert all(overlapping[a] >= 1 for a, _ in ACTIONS), overlapping
