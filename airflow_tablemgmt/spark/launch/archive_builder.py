"""The driver's class-data archive, written by a run of its own that no job waits for.

A JVM writes a dynamic class-data archive (``-XX:ArchiveClassesAtExit``) while it exits: 10 s on a quiet
2-core host, 60-140 s under load (measured: ``DestroyJavaVM`` defining and linking classes, then the VM
thread writing 110-140 MB). When a maintenance job's JVM wrote it, that was the job's ``jvm_exit``: its
worker slot and its table lease held for the dump. So a job that finds no archive for its set-up runs
without one, exits at once, and asks for one here: a detached process (its own session, lowered
priority, no lease, outliving the task) plans the archive as a job would (``class_cache.plan``: the
same key, the creation lock, the temp file) and runs ``spark-submit`` with the job's JVM options, jars
and environment on ``spark/job/warm_up.py``, which loads Spark's and Iceberg's classes on a scratch
table; the archive is kept as a job's would have been (``DriverClassCache.finish``). The next jobs map
it. Its log: ``<cache dir>/builder.log``.

    python -m airflow_tablemgmt.spark.launch.archive_builder <request.json>
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from itertools import count
from pathlib import Path

from airflow_tablemgmt.spark.launch import archive_files, class_cache
from airflow_tablemgmt.spark.launch.environment import job_environment

log = logging.getLogger(__name__)

WARM_UP = Path(__file__).resolve().parent.parent / "job" / "warm_up.py"
LOG_NAME = "builder.log"
REQUEST_GLOB = "build-*.json"
TIMEOUT_S = 1800.0  # a build that outlives this is killed (and its temp archive removed)
_counter = count()


def request(
    *, directory: Path, conf: dict[str, str], jars: list[str], packages: str | None, env: dict[str, str]
) -> int:
    """Start the detached build for this set-up; returns its pid. The request file (0600: the conf may
    hold the connection's secrets) is read and removed by the builder."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"build-{os.getpid()}-{next(_counter)}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"conf": conf, "jars": jars, "packages": packages, "env": env}, f)
    with (directory / LOG_NAME).open("a") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # not in the task's process group: the task's end does not stop it
            close_fds=True,
            preexec_fn=_lower_priority,  # noqa: PLW1509 - only os.nice, before exec
        )
    return proc.pid


def _lower_priority() -> None:
    try:
        os.nice(10)
    except OSError:
        pass


def build(request_path: Path) -> int:
    """Plan and, unless an archive exists or another run creates it, write the archive."""
    directory = request_path.parent
    try:
        req = json.loads(request_path.read_text())
    finally:
        request_path.unlink(missing_ok=True)
    env: dict[str, str] = req["env"]
    settings = class_cache.ClassCacheSettings(enabled=True, directory=directory)
    cache, submitted = class_cache.plan(
        settings=settings,
        conf=req["conf"],
        jars=req["jars"],
        packages=req["packages"],
        env=env,
        cluster=False,
        verify=False,
    )
    if cache.mode != "create":
        log.info("nothing to build: %s", cache.describe())
        return 0
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="tms-class-archive-") as scratch:
            argv = _argv(env, submitted, req["jars"], req["packages"], scratch)
            log.info("building %s: %s", cache.archive, " ".join(argv[:3]))
            done = subprocess.run(
                argv,
                env=job_environment(env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                check=False,
            )
        lines = (done.stdout + done.stderr).splitlines()
        note, _ = cache.finish(lines, succeeded=done.returncode == 0, result_seen=True)
        log.info("%s (%.0f s, exit code %d)", note, time.monotonic() - started, done.returncode)
        if done.returncode != 0:
            log.info("last lines:\n%s", "\n".join(lines[-15:]))
        return 0 if done.returncode == 0 else 1
    except BaseException:
        cache.release()
        raise


def _argv(
    env: dict[str, str], conf: dict[str, str], jars: list[str], packages: str | None, scratch: str
) -> list[str]:
    spark_home = env.get("SPARK_HOME") or os.environ.get("SPARK_HOME")
    if not spark_home:
        raise RuntimeError("no SPARK_HOME in the job's environment")
    argv = [
        str(Path(spark_home) / "bin" / "spark-submit"),
        "--master",
        "local[1]",
        "--name",
        "tablemgmt-class-archive",
    ]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    if jars:
        argv += ["--jars", ",".join(jars)]
    if packages:
        argv += ["--packages", packages]
    return [*argv, str(WARM_UP), scratch]


def building(directory: Path) -> bool:
    """Whether a build is pending or running in ``directory`` (a request not yet read, or a creation
    lock whose owner is alive): what a benchmark or a test waits for before it measures."""
    if any(directory.glob(REQUEST_GLOB)):
        return True
    for lock in directory.glob("driver-*.lock"):
        try:
            if not archive_files._stale(lock.read_text(), lock.stat().st_mtime):  # noqa: SLF001
                return True
        except OSError:  # released meanwhile
            continue
    return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s archive builder: %(message)s")
    if len(args) != 1:
        log.error("usage: python -m airflow_tablemgmt.spark.launch.archive_builder <request.json>")
        return 2
    return build(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
