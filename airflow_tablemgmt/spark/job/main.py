"""The program ``spark-submit`` runs: ``spark/job/main.py --spec job-spec.json``; and :func:`run_job`, the
same job on a session the caller has (the Spark Connect engine's remote session, ``spark/connect/``).
(Just over 400 lines on purpose: the driver's one entry, kept whole so the result-line protocol is read in one place.)

It reads the JSON ``JobSpec``, validates the table identifier and catalog, starts (or joins) the
SparkSession, runs the action's maintainer, and prints exactly one JSON result line on stdout
(see ``spark/protocol.py``). Everything else it says goes to stderr through ``logging`` (in client
mode Spark's PythonRunner merges that into spark-submit's stdout; the result line is found by its
``"tms_result": 1`` marker, not by position). Exit code 0 on success, 1 on failure.

The session starts in a background thread as soon as the spec is valid. The main thread meanwhile
imports the maintainers and, for a hadoop table, reads the table's current metadata and its figures
before the action without Spark (``early_read``), so that work takes no time of its own. Where
that read has no plain answer, the job loads the table through Spark once the session is up, as it
always did. The timings are the main thread's: ``session`` is what it still waited for the session
after that work (the log says how long the start took in all).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from airflow_tablemgmt.core.process_age import process_age  # standard library only: read before the rest

# Taken before anything else is imported: the job reports its own start-up and import time.
_AGE_AT_START = process_age()
_IMPORTS_STARTED = time.perf_counter()
_PYTHON_STARTED_AT = time.time() - (_AGE_AT_START or 0.0)

# Run as a file, Python puts this directory first on sys.path, where conf.py, java.py ... would
# shadow top-level modules of the same name. The package is installed; import it absolutely.
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]


def installed_spark_zips(path: list[str]) -> list[str]:
    """The entries of ``path`` that are spark-submit's ``pyspark.zip`` / ``py4j-<v>-src.zip`` of the
    installed pyspark package itself (a pip-installed pyspark is its own SPARK_HOME), with the installed
    py4j at the zip's version: the same code as the installed packages, minus their compiled bytecode.
    A separate Spark distribution's zips are not the installed package's and are kept."""
    package = _installed_package_dir("pyspark")
    if package is None:
        return []
    lib = package / "python" / "lib"
    found = []
    for entry in path:
        p = Path(entry)
        if not entry.endswith(".zip") or p.parent.resolve() != lib.resolve():
            continue
        if p.name == "pyspark.zip":
            found.append(entry)
        elif p.name.startswith("py4j-") and p.name.endswith("-src.zip"):
            if _installed_version("py4j") == p.name[len("py4j-") : -len("-src.zip")]:
                found.append(entry)
    return found


def _installed_package_dir(name: str) -> Path | None:
    """The directory of the installed (site-packages) package ``name``, never one inside a zip."""
    import importlib.machinery

    found = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if not p.endswith(".zip")])
    origin = getattr(found, "origin", None)
    if not origin or ".zip" in origin:
        return None
    return Path(origin).resolve().parent


def _installed_version(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# Before anything imports pyspark: from the zips it would be compiled again on every run (≈ 0.25 s).
for _zip in installed_spark_zips(sys.path):
    sys.path.remove(_zip)

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from airflow_tablemgmt.core.errors import TableNotFound  # noqa: E402
from airflow_tablemgmt.core.factory import JobSpec  # noqa: E402
from airflow_tablemgmt.core.identifiers import TableIdentifier  # noqa: E402
from airflow_tablemgmt.core.tables import CatalogSpec  # noqa: E402
from airflow_tablemgmt.spark.conf import app_name, validated_catalog  # noqa: E402
from airflow_tablemgmt.spark.connect.errors import NotOnConnect  # noqa: E402
from airflow_tablemgmt.spark.connect.policy import connect_refusal, is_remote  # noqa: E402
from airflow_tablemgmt.spark.errors import InvalidJobSpec, NoExecutors  # noqa: E402
from airflow_tablemgmt.spark.job import commit_mark, lease_guard  # noqa: E402
from airflow_tablemgmt.spark.job.cost import RunMeter  # noqa: E402
from airflow_tablemgmt.spark.job.redact import REDACT, redact, secret_values  # noqa: E402
from airflow_tablemgmt.spark.job.session import BackgroundSession  # noqa: E402
from airflow_tablemgmt.spark.job.watchdog import ExecutorWatchdog  # noqa: E402
from airflow_tablemgmt.spark.protocol import (  # noqa: E402
    Timings,
    current_timings,
    describe_exception,
    describe_timings,
    failure_line,
    parse_result,
    recording,
    success_line,
)

_IMPORTS_SECONDS = time.perf_counter() - _IMPORTS_STARTED

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.spark.protocol import JobResult

log = logging.getLogger("airflow_tablemgmt.spark.job")


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s tablemgmt: %(message)s"))
    handler.addFilter(REDACT)
    root = logging.getLogger("airflow_tablemgmt")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False


def load_spec(path: Path) -> JobSpec:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise InvalidJobSpec(f"--spec {path}: cannot read a JSON job spec: {e}") from None
    if not isinstance(raw, dict):
        raise InvalidJobSpec(f"--spec {path}: expected a JSON object, got {type(raw).__name__}")
    try:
        return JobSpec(**raw)
    except TypeError as e:
        raise InvalidJobSpec(f"--spec {path}: {e}") from None


def table_of(job: JobSpec) -> TableIdentifier:
    try:
        return TableIdentifier(job.table["catalog"], job.table["namespace"], job.table["name"])
    except (KeyError, TypeError):
        raise InvalidJobSpec(
            f"table: expected {{'catalog', 'namespace', 'name'}}, got {job.table!r}"
        ) from None


def catalog_of(job: JobSpec, table: TableIdentifier) -> CatalogSpec:
    # The spec file holds the catalog with its secret references already resolved by the worker.
    catalog = validated_catalog(job.catalog)
    if catalog.name != table.catalog:
        raise InvalidJobSpec(f"catalog: spec is for catalog {catalog.name!r} but the table is {table}")
    return catalog


@dataclass
class _Outcome:
    """What one run produced, before it becomes the result line (``main`` times the session stop first)."""

    code: int
    action: str
    table: str | None
    application_id: str | None
    duration_seconds: float
    summary: dict[str, Any] | None = None
    error_class: str = ""
    error: str = ""
    jvm_started_at: float | None = None
    cost: dict[str, Any] | None = None

    def line(self, timings: Timings) -> str:
        if self.summary is not None:
            self.summary["timings"] = timings.as_dict()
            return success_line(
                self.action,
                self.table or "",
                self.summary,
                duration_seconds=self.duration_seconds,
                application_id=self.application_id,
                jvm_started_at=self.jvm_started_at,
            )
        return failure_line(
            self.action,
            self.table,
            self.error_class,
            self.error,
            duration_seconds=self.duration_seconds,
            application_id=self.application_id,
            timings=timings.as_dict(),
            cost=self.cost,
        )


def run(job: JobSpec, spark: SparkSession | None = None) -> tuple[int, str]:
    """Run ``job`` and return ``(exit code, result line)``. Never raises for a job failure.

    Without ``spark`` the job starts a session, and leaves it running."""
    timings = current_timings() or Timings()
    outcome = _execute(job, spark, timings, BackgroundSession())
    return outcome.code, outcome.line(timings)


def run_job(spark: SparkSession, job: JobSpec) -> JobResult:
    """Run ``job`` on ``spark`` (a classic session, or a Spark Connect remote one) and return its
    parsed result, exactly as the spark-submit entry would print it (secrets redacted). Never raises for
    a job failure; the session is the caller's and stays open."""
    timings = Timings()
    with recording(timings):
        outcome = _execute(job, spark, timings, BackgroundSession())
    return parse_result([redact(outcome.line(timings), REDACT.secrets)])


def _application_id(spark: SparkSession) -> str | None:
    if is_remote(spark):  # the server's application: asked once per session (a batch's kept one: per batch)
        known = getattr(spark, _APP_ID, None)
        if known is not None:
            return str(known)
        try:
            app = spark.conf.get("spark.app.id")
        except Exception:  # noqa: BLE001 - an id for the log only
            return None
        setattr(spark, _APP_ID, app)
        return app
    return spark.sparkContext.applicationId


_APP_ID = "_tablemgmt_app_id"


def _execute(
    job: JobSpec, spark: SparkSession | None, timings: Timings, background: BackgroundSession
) -> _Outcome:
    """Run ``job`` on ``spark``, or on a session ``background`` starts once the spec is valid (the
    caller stops it: ``background.join()``)."""
    table_name: str | None = None
    app_id: str | None = None
    jvm_started_at: float | None = None
    watchdog: ExecutorWatchdog | None = None
    started = time.monotonic()
    meter = RunMeter(job, own_session=spark is None)
    try:
        table = table_of(job)
        table_name = str(table)
        catalog = catalog_of(job, table)
        with timings.phase("imports"):
            if spark is None:  # imports pyspark, then starts the session on a thread of its own
                background.start(catalog, app_name(job))
            from airflow_tablemgmt.spark.job import early_read
            from airflow_tablemgmt.spark.job.metrics import FirstRead, load_table
            from airflow_tablemgmt.spark.job.plugins import format_maintainer, format_module, reads_own_table

            _import_quietly("pyiceberg.table")  # the metrics' reader
            maintainer = format_maintainer(catalog, job.action)  # imports the format's driver-side module
        refusal = connect_refusal(job) if spark is not None and is_remote(spark) else None
        if refusal is not None:
            raise NotOnConnect(refusal)
        # A maintainer that reads its own table (another catalog's format, or one that creates its table: a
        # dynamic table's first refresh) runs without the job loading it.
        needs_table = not reads_own_table(catalog, maintainer)
        early: early_read.EarlyRead | None = None
        if needs_table:
            with timings.phase("metrics_before"):
                early = early_read.read_early(catalog, table)
        if spark is None:
            with timings.phase("session"):
                spark = background.wait()
            log.info("session started in %.2fs", background.seconds or 0.0)
            jvm_started_at = _jvm_started_at(spark)
            if jvm_started_at is not None and jvm_started_at < _PYTHON_STARTED_AT:
                # spark-submit started the driver JVM, which started this Python process.
                timings.add("driver_jvm", _PYTHON_STARTED_AT - jvm_started_at)
        app_id = _application_id(spark)
        log.info("spark application %s", app_id)
        meter.start(spark)
        # On Spark Connect the server's executors are the server's concern (its own cluster manager).
        if not is_remote(spark):
            watchdog = ExecutorWatchdog(spark.sparkContext)
            if watchdog.applies:
                watchdog.start()
        # What the job read of its table so far, handed to the maintainer for the metrics before.
        first: FirstRead | None = None
        if needs_table:
            if early is not None and early.agrees_with(spark):
                first = early
            else:
                # The early read had no plain answer: Spark's catalog decides, a missing table included.
                with timings.phase("table_load"):
                    first = load_table(spark, table)
                if first is None:
                    raise TableNotFound(
                        f"table {table} does not exist in catalog {catalog.name!r} ({_where(catalog)})"
                    )
        log.info("%s on %s (process %s, attempt %d)", job.action, table, job.process_id, job.attempt)
        started = time.monotonic()
        inner = ("metrics_before", "procedure", "metrics_after")
        timed_before = sum(timings.seconds.get(p, 0.0) for p in inner)
        lease_guard.fence(f"{job.action} on {table}")  # the worker must have confirmed the lease now
        module = format_module(catalog)  # the format puts the mark where its commits carry it
        commit_mark.apply(spark, job, remote=is_remote(spark), module=module)
        try:
            with recording(timings):
                summary: dict[str, Any] = maintainer(spark, table, dict(job.options), early=first)
        finally:
            commit_mark.clear(spark, job, remote=is_remote(spark), module=module)
        duration = round(time.monotonic() - started, 3)
        timed_inside = sum(timings.seconds.get(p, 0.0) for p in inner) - timed_before
        timings.add("maintainer_other", duration - timed_inside)
        summary["duration_seconds"] = duration
        log.info("%s on %s succeeded in %.1fs", job.action, table, duration)
        if (cost := meter.read(timings)) is not None:
            summary["cost"] = cost
        return _Outcome(0, job.action, table_name, app_id, duration, summary, jvm_started_at=jvm_started_at)
    except Exception as e:  # noqa: BLE001 - every failure becomes the result line
        error_class, message = describe_exception(e)
        if watchdog is not None and watchdog.reason is not None:
            error_class, message = NoExecutors.__name__, watchdog.reason
        log.error("%s on %s failed: %s: %s", job.action, table_name, error_class, message)
        log.debug("failure detail", exc_info=True)
        return _Outcome(
            1,
            job.action,
            table_name,
            app_id,
            round(time.monotonic() - started, 3),
            error_class=error_class,
            error=message,
            jvm_started_at=jvm_started_at,
            cost=meter.read(timings),
        )
    finally:
        meter.stop()
        if watchdog is not None:
            watchdog.stop()


def _jvm_started_at(spark: SparkSession) -> float | None:
    """When the driver JVM started (epoch seconds), from its RuntimeMXBean."""
    try:
        jvm = spark._jvm  # noqa: SLF001 - no public API for the JVM's start time
        assert jvm is not None
        return float(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime()) / 1000
    except Exception:  # noqa: BLE001 - a timing never fails a job
        return None


def _where(catalog: CatalogSpec) -> str:
    return f"warehouse {catalog.warehouse}" if catalog.warehouse else f"{catalog.type.value} catalog"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="main.py", description="Run one table-maintenance action")
    parser.add_argument("--spec", type=Path, help="path of the JSON JobSpec")
    parser.add_argument("--batch", type=Path, help="a batch's directory: each table's job in turn (batch.py)")
    args = parser.parse_args(argv)
    configure_logging()
    if args.batch is not None:  # a planned batch's tables in this one driver
        from airflow_tablemgmt.spark.job.batch import run_batch_dir

        return run_batch_dir(args.batch, execute=_execute, load_spec=load_spec)
    if args.spec is None:
        parser.error("one of --spec or --batch is required")
    # The worker's lease confirmation beside the spec: the driver stops itself when it runs out.
    lease_guard.start_beside(args.spec)
    try:
        job = load_spec(args.spec)
    except Exception as e:  # noqa: BLE001
        error_class, message = describe_exception(e)
        print(failure_line(None, None, error_class, message), flush=True)
        return 1
    REDACT.secrets = secret_values(job)
    timings = Timings()
    if _AGE_AT_START is not None:
        timings.add("python_startup", _AGE_AT_START)
    timings.add("imports", _IMPORTS_SECONDS)
    # Stop only a session this call started: run in-process (tests), a session that was already
    # active belongs to the caller.
    existing = _active_session()
    background = BackgroundSession()
    try:
        with recording(timings):
            outcome = _execute(job, None, timings, background)
    finally:
        # Also when the job failed before it waited for the session: it is stopped once it is up.
        spark = background.join()
        if spark is not None and existing is None:
            with timings.phase("session_stop"):
                spark.stop()
    line = outcome.line(timings)
    log.info("timings: %s", describe_timings(timings.as_dict()))
    # The result line becomes the process summary and the task's XCom: never a secret in it.
    print(redact(line, REDACT.secrets), flush=True)
    return outcome.code


def _import_quietly(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - the metrics fall back to Spark's metadata tables without it
        log.debug("importing %s failed", module, exc_info=True)


def _active_session() -> SparkSession | None:
    if "pyspark" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


if __name__ == "__main__":
    sys.exit(main())
