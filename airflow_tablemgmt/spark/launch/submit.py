"""A submission as data (``SubmitSpec``), and a local runner built on it.

The Airflow side hands the same ``SubmitSpec`` to ``SparkSubmitHook``; tests, the CLI and the
benchmarks use ``run_local``. Nothing here imports pyspark.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.conf import app_name, base_conf, launch_conf, spark_home, validated_catalog
from airflow_tablemgmt.spark.launch.artifacts import (
    ArtifactSettings,
    catalog_needs,
    driver_class_path,
    jar_paths,
)
from airflow_tablemgmt.spark.launch.class_cache import spark_defaults
from airflow_tablemgmt.spark.launch.environment import job_environment
from airflow_tablemgmt.spark.launch.java import resolve_java_home
from airflow_tablemgmt.spark.protocol import FAILED, RESULT_MARKER, JobResult, describe_timings, parse_result

log = logging.getLogger(__name__)

# The driver program spark-submit runs (a file path: spark/job/main.py).
JOB_MAIN = Path(__file__).resolve().parent.parent / "job" / "main.py"
SPEC_FILE = "job-spec.json"
LOG_FILE = "spark-submit.log"
__all__ = [
    "JOB_MAIN",
    "JobResult",
    "SubmitClock",
    "SubmitSpec",
    "build_submit_spec",
    "parse_result",
    "run_local",
    "write_spec",
]


@dataclass
class SubmitSpec:
    """Everything ``spark-submit`` needs, minus the master (which belongs to the connection)."""

    application: str
    application_args: list[str]
    conf: dict[str, str]
    jars: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    name: str = "tablemgmt"

    def argv(self, spark_submit: str, master: str = "local[2]") -> list[str]:
        """The full command line, one argument per list item (no shell involved)."""
        args = [spark_submit, "--master", master, "--name", self.name]
        for key, value in self.conf.items():
            args += ["--conf", f"{key}={value}"]
        if self.jars:
            args += ["--jars", ",".join(self.jars)]
        if self.packages:
            args += ["--packages", ",".join(self.packages)]
        return [*args, self.application, *self.application_args]


def _catalog(job: JobSpec) -> CatalogSpec:
    return validated_catalog(job.catalog, "job spec catalog")


def submit_env(java_home: str | None = None) -> dict[str, str]:
    """JAVA_HOME, SPARK_HOME, the job's Python, and PATH with this interpreter's ``bin`` first.

    ``spark-submit`` runs ``find_spark_home.py`` with the first ``python3`` on PATH, so the venv's
    ``bin`` must lead even when SPARK_HOME is set.
    """
    venv_bin = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    return {
        "JAVA_HOME": java_home or resolve_java_home(),
        "SPARK_HOME": spark_home(),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": venv_bin + (os.pathsep + path if path else ""),
    }


USER_JARS = "spark.jars"
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"
USER_PACKAGES = "spark.jars.packages"


def merge_user_jars(
    conf: dict[str, str], defaults: dict[str, str], ours: list[str]
) -> tuple[dict[str, str], list[str], list[str]]:
    """``(conf, jars, packages)`` for spark-submit, keeping the user's own jars and packages.

    spark-submit's ``--jars`` / ``--packages`` replace ``spark.jars`` / ``spark.jars.packages`` from
    ``--conf`` and from ``spark-defaults.conf`` (and a ``--conf`` replaces the defaults file's value), so
    the user's effective value is read with that precedence and passed on beside ours; the two keys leave
    ``conf``. Repeats are dropped, order kept (ours first).
    """
    conf = dict(conf)

    def users(key: str) -> list[str]:
        value = conf.pop(key, None)
        value = defaults.get(key, "") if value is None else value
        return [p.strip() for p in value.split(",") if p.strip()]

    jars = list(dict.fromkeys([*ours, *users(USER_JARS)]))
    packages = list(dict.fromkeys(users(USER_PACKAGES)))
    return conf, jars, packages


def build_submit_spec(
    job: JobSpec, spec_path: Path, *, local: bool = True, artifacts: ArtifactSettings | None = None
) -> SubmitSpec:
    """Describe the submission of ``job`` whose JSON spec is (or will be) at ``spec_path``.

    The catalog's properties are not on the command line (``ps`` and SparkSubmitHook's log would show
    them): the job (``spark/job/main.py``) reads them from the spec file and sets them on its session builder. The jars the
    catalog needs come from the artifact resolver (``spark/launch/artifacts.py``) as local paths; the
    user's own ``spark.jars`` / ``spark.jars.packages`` are kept beside them.
    """
    catalog = _catalog(job)
    env = submit_env()
    defaults = spark_defaults(env)
    needs = catalog_needs(catalog)
    conf, jars, packages = merge_user_jars(
        {**base_conf(local=local), **launch_conf(catalog)}, defaults, jar_paths(needs, artifacts)
    )
    on_driver = driver_class_path(needs, artifacts)
    if on_driver:  # beside the user's own entries (a --conf replaces spark-defaults.conf's value)
        users = conf.get(DRIVER_CLASS_PATH, defaults.get(DRIVER_CLASS_PATH, ""))
        entries = [*on_driver, *(p for p in users.split(os.pathsep) if p.strip())]
        conf[DRIVER_CLASS_PATH] = os.pathsep.join(dict.fromkeys(entries))
    return SubmitSpec(
        application=str(JOB_MAIN),
        application_args=["--spec", str(Path(spec_path).resolve())],
        conf=conf,
        jars=jars,
        packages=packages,
        env=env,
        name=app_name(job),
    )


def build_batch_submit_spec(
    job: JobSpec, batch_dir: Path, *, local: bool = True, artifacts: ArtifactSettings | None = None
) -> SubmitSpec:
    """The submission of one driver that runs a batch's jobs in turn (``spark/job/batch.py``), from the first
    table's ``job``: that job's own launch conf, jars and environment (every table the driver runs shares
    them, :func:`driver_key`), the batch's directory instead of a spec."""
    spec = build_submit_spec(job, Path(batch_dir) / "job.json", local=local, artifacts=artifacts)
    spec.application_args = ["--batch", str(Path(batch_dir).resolve())]
    t = job.table
    spec.name = f"tms-{job.action}-batch-{t.get('catalog')}.{t.get('namespace')}.{t.get('name')}"
    return spec


def driver_key(job: JobSpec, spec: SubmitSpec) -> str:
    """What two jobs must share to run in one driver: the catalog (the driver's session is built with the
    first job's catalog), the session's launch conf, the jars and packages on its class path, and the
    environment."""
    return json.dumps(
        [job.catalog, spec.conf, spec.jars, spec.packages, spec.env], sort_keys=True, default=str
    )


def write_spec(job: JobSpec, path: Path) -> Path:
    """Write ``job`` as JSON to ``path``, readable and writable by this user only (0600).

    The spec carries the catalog's resolved secrets. A directory created here is 0700; the file is
    created 0600 (never world-readable, not even between create and chmod) and re-chmodded if it
    already existed.
    """
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(json.dumps(job.to_json_dict(), indent=2, default=str))
    return path


class SubmitClock:
    """The submitting side's part of a run's ``timings``: what only it sees.

    ``hook_setup`` (spec file, command line, connection), ``spark_submit`` (launch to the driver JVM's
    start, from the job's ``jvm_started_at``; local and client mode, where both clocks are this
    host's), ``jvm_exit`` (result line printed to spark-submit's exit) and ``result_parse``.
    """

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.launched: float | None = None
        self.launched_at: float | None = None
        self.result_seen: float | None = None
        self.exited: float | None = None

    def launch(self) -> None:
        self.launched = time.perf_counter()
        self.launched_at = time.time()

    def line(self, line: str) -> None:
        if self.result_seen is None and RESULT_MARKER in line:
            self.result_seen = time.perf_counter()

    def exit(self) -> None:
        self.exited = time.perf_counter()

    def complete(self, result: JobResult, parse_seconds: float) -> dict[str, float]:
        """Add these phases and the ``total`` to ``result.summary["timings"]`` (a success's summary;
        a failure's ``timings`` sit in its raw result) and return the whole breakdown."""
        own: dict[str, float] = {"result_parse": parse_seconds}
        if self.launched is not None:
            own["hook_setup"] = self.launched - self.started
        jvm_started_at = result.raw.get("jvm_started_at")
        if self.launched_at is not None and isinstance(jvm_started_at, (int, float)):
            launch = float(jvm_started_at) - self.launched_at
            if launch >= 0:
                own["spark_submit"] = launch
        if self.result_seen is not None and self.exited is not None:
            own["jvm_exit"] = self.exited - self.result_seen
        own["total"] = time.perf_counter() - self.started
        target = result.summary if result.ok else result.raw
        timings = target.get("timings")
        if not isinstance(timings, dict):
            timings = target["timings"] = {}
        timings.update({k: round(max(v, 0.0), 3) for k, v in own.items()})
        return timings


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    interesting = [ln for ln in text if ln.strip() and not ln.lstrip().startswith("at ")]
    return "\n".join(interesting[-lines:])


def run_local(
    job: JobSpec,
    workdir: Path,
    timeout: float | None = None,
    *,
    master: str = "local[2]",
    artifacts: ArtifactSettings | None = None,
) -> JobResult:
    """Run ``job`` with ``spark-submit --master <master>`` and return its parsed result.

    Spark's log goes to ``<workdir>/spark-submit.log``; ``raw`` also carries ``exit_code`` and
    ``log`` (that path). A job that dies without a result line, or outlives ``timeout`` seconds,
    comes back as a FAILED result, never as an exception.
    """
    clock = SubmitClock()
    workdir = Path(workdir)
    spec_path = write_spec(job, workdir / SPEC_FILE)
    spec = build_submit_spec(job, spec_path, artifacts=artifacts)
    spark_submit = str(Path(spec.env["SPARK_HOME"]) / "bin" / "spark-submit")
    argv = spec.argv(spark_submit, master)
    env = job_environment(spec.env)
    log_path = workdir / LOG_FILE
    log_path.write_text("")
    stdout_lines: list[str] = []
    log.info("running %s", " ".join(argv))
    # Spark's PythonRunner merges the job's stderr into its stdout; the JVM logs to stderr.
    # Both land in one log file (appends, whole lines); the result is searched in stdout only.
    with log_path.open("a") as jvm_log, log_path.open("a") as job_log:
        clock.launch()
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=jvm_log, text=True, start_new_session=True
        )

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                clock.line(line)
                stdout_lines.append(line)
                job_log.write(line)
                job_log.flush()

        reader = threading.Thread(target=pump, name="spark-submit-stdout", daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            reader.join(timeout=5)
            return JobResult(
                status=FAILED,
                error=f"spark-submit did not finish within {timeout} seconds; killed",
                error_class="Timeout",
                raw={"exit_code": None, "log": str(log_path)},
            )
        reader.join()
    clock.exit()
    parsing = time.perf_counter()
    result = parse_result(stdout_lines)
    if result.raw:
        log.info("timings: %s", describe_timings(clock.complete(result, time.perf_counter() - parsing)))
    if not result.raw:
        result.error = (
            f"spark-submit exited with code {proc.returncode} without a result line; "
            f"last log lines:\n{_tail(log_path)}"
        )
    result.raw.setdefault("exit_code", proc.returncode)
    result.raw.setdefault("log", str(log_path))
    return result
