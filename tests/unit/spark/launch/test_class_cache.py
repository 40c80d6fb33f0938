"""The driver's class-data archive: when it is used, created, finished, dropped; never a bad file to a JVM.

Real files in a real cache directory, the real Java and SPARK_HOME for the key; no JVM is started (the
archive a JVM would write is stood in for by a file with the dynamic archive's magic number).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_tablemgmt.spark.conf import spark_home
from airflow_tablemgmt.spark.launch import archive_files, class_cache
from airflow_tablemgmt.spark.launch.class_cache import (
    JAVA_OPTIONS,
    ClassCacheSettings,
    DriverClassCache,
    plan,
)
from airflow_tablemgmt.spark.launch.java import resolve_java_home

CONF = {"spark.ui.enabled": "false", "spark.driver.memory": "1g"}
RESULT_LINE = 'tms_result {"status": "SUCCESS"}'


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "JAVA_HOME": resolve_java_home(),
        "SPARK_HOME": spark_home(),
        "SPARK_CONF_DIR": str(tmp_path / "spark-conf"),  # absent: nothing on the classpath from it
    }


@pytest.fixture
def settings(tmp_path: Path) -> ClassCacheSettings:
    return ClassCacheSettings(enabled=True, directory=tmp_path / "jvm")


def _plan(
    settings: ClassCacheSettings,
    env: dict[str, str],
    conf: dict[str, str] | None = None,
    *,
    cluster: bool = False,
) -> tuple[DriverClassCache, dict[str, str]]:
    return plan(settings=settings, conf=dict(conf or CONF), jars=[], packages=None, env=env, cluster=cluster)


def _dump(cache: DriverClassCache, size: int = 4096) -> None:
    """What the JVM does at exit when told ``-XX:ArchiveClassesAtExit=<temp>``."""
    assert cache.temp is not None
    cache.temp.write_bytes((0xF00BABA8).to_bytes(4, "little") + b"\0" * (size - 4))


def _create(settings: ClassCacheSettings, env: dict[str, str]) -> Path:
    cache, _ = _plan(settings, env)
    assert cache.mode == "create", cache.reason
    _dump(cache)
    note, _ = cache.finish([RESULT_LINE], succeeded=True, result_seen=True)
    assert note and "created" in note
    assert cache.archive is not None
    return cache.archive


def _files(settings: ClassCacheSettings) -> list[str]:
    return sorted(p.name for p in settings.directory.iterdir())


def test_the_first_run_creates_and_the_next_uses(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    cache, conf = _plan(settings, env)
    assert cache.mode == "create"
    assert f"-XX:ArchiveClassesAtExit={cache.temp}" in conf[JAVA_OPTIONS]
    _dump(cache, 10_000)
    cache.finish([RESULT_LINE], succeeded=True, result_seen=True)
    archive = cache.archive
    assert archive is not None and archive.name.endswith("-10000.jsa")
    assert _files(settings) == [archive.name]  # no temp file, no lock left

    used, conf = _plan(settings, env)
    assert used.mode == "use" and used.archive == archive
    assert conf[JAVA_OPTIONS] == f"-XX:SharedArchiveFile={archive}"
    assert "using" in used.describe()


def test_a_truncated_archive_is_never_handed_to_a_jvm(
    settings: ClassCacheSettings, env: dict[str, str]
) -> None:
    archive = _create(settings, env)
    with archive.open("r+b") as f:
        f.truncate(1000)

    cache, conf = _plan(settings, env)

    assert cache.mode == "create"  # replaced by this run
    assert "SharedArchiveFile" not in conf[JAVA_OPTIONS]
    assert not archive.exists()
    cache.release()


def test_a_failed_job_never_finishes_its_archive(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    cache, _ = _plan(settings, env)
    _dump(cache)
    note, dump_failed = cache.finish(["Exception in thread main"], succeeded=False, result_seen=False)
    assert note and "not kept" in note and not dump_failed
    assert _files(settings) == []
    assert _plan(settings, env)[0].mode == "create"  # the next run tries again


def test_a_run_ended_by_an_exception_leaves_no_files(
    settings: ClassCacheSettings, env: dict[str, str]
) -> None:
    cache, _ = _plan(settings, env)
    _dump(cache)
    cache.release()  # what SparkJobHook does when the submission raises
    assert _files(settings) == []


def _first_run(
    directory: str, env: dict[str, str], start: multiprocessing.synchronize.Barrier, out: object
) -> None:
    settings = ClassCacheSettings(enabled=True, directory=Path(directory))
    start.wait()
    cache, _ = _plan(settings, env)
    start.wait()  # both have decided before either finishes
    if cache.mode == "create":
        _dump(cache)
    if cache.mode != "off":
        cache.finish([RESULT_LINE], succeeded=True, result_seen=True)
    out.put(cache.mode)  # type: ignore[attr-defined]


def test_two_concurrent_first_runs_create_once(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Barrier(2), ctx.Queue()
    runs = [ctx.Process(target=_first_run, args=(str(settings.directory), env, start, out)) for _ in range(2)]
    for p in runs:
        p.start()
    for p in runs:
        p.join(60)
    assert [p.exitcode for p in runs] == [0, 0]
    assert sorted([out.get(timeout=5), out.get(timeout=5)]) == ["create", "off"]
    files = _files(settings)
    assert len(files) == 1 and files[0].endswith(".jsa")


def test_a_dead_creators_lock_and_temp_are_cleared(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    cache, _ = _plan(settings, env)
    assert cache.lock is not None and cache.temp is not None
    host = archive_files.host_tag()
    leftover = cache.temp.with_name(cache.temp.name.replace(f".{host}.{os.getpid()}.", f".{host}.{pid}."))
    cache.release()
    lock = settings.directory / (leftover.name.split(".")[0] + ".lock")
    lock.write_text(f"{socket.gethostname()} {pid} 1\n")
    leftover.write_bytes(b"half an archive")

    again, _ = _plan(settings, env)

    assert again.mode == "create"
    assert not leftover.exists()
    again.release()
    assert _files(settings) == []


def test_a_live_creators_lock_is_respected(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    first, _ = _plan(settings, env)
    assert first.mode == "create"
    second, conf = _plan(settings, env)
    assert second.mode == "off" and "another run is creating" in second.reason
    assert JAVA_OPTIONS not in conf
    first.release()


def test_switched_off_or_cluster_mode_adds_no_option(
    settings: ClassCacheSettings, env: dict[str, str]
) -> None:
    _create(settings, env)
    off = ClassCacheSettings(enabled=False, directory=settings.directory)
    for cache, conf in (
        _plan(off, env),
        _plan(settings, env, cluster=True),
        _plan(settings, env, {**CONF, "spark.submit.deployMode": "cluster"}),
    ):
        assert cache.mode == "off"
        assert JAVA_OPTIONS not in conf


def test_the_users_java_options_are_kept(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    theirs = {**CONF, JAVA_OPTIONS: "-Dfrom.conf=1"}
    cache, conf = _plan(settings, env, theirs)
    assert cache.mode == "create"
    assert conf[JAVA_OPTIONS].startswith("-Dfrom.conf=1 -XX:ArchiveClassesAtExit=")
    cache.release()


def test_the_defaults_files_java_options_are_kept(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    conf_dir = Path(env["SPARK_CONF_DIR"])
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "# ours\nspark.driver.extraJavaOptions   -Dfrom.defaults=1\n"
    )
    # A non-empty directory on the classpath: the JVM cannot write an archive, so none is created ...
    cache, conf = _plan(settings, env)
    assert cache.mode == "off" and "non-empty directory" in cache.reason
    assert JAVA_OPTIONS not in conf
    # ... but one that exists for this setup is used, after the defaults file's options (which our
    # --conf replaces).
    key = class_cache.cache_key(
        env=env, conf=CONF, defaults=class_cache.spark_defaults(env), jars=[], packages=None
    )
    settings.directory.mkdir(exist_ok=True)
    archive = settings.directory / f"driver-{key}-5.jsa"
    archive.write_bytes(b"12345")
    cache, conf = _plan(settings, env)
    assert cache.mode == "use"
    assert conf[JAVA_OPTIONS] == f"-Dfrom.defaults=1 -XX:SharedArchiveFile={archive}"


@pytest.mark.parametrize("theirs", ["-Xshare:off", "-XX:SharedArchiveFile=/elsewhere.jsa -Dx=1"])
def test_the_users_own_sharing_choice_stands(
    settings: ClassCacheSettings, env: dict[str, str], theirs: str
) -> None:
    cache, conf = _plan(settings, env, {**CONF, JAVA_OPTIONS: theirs})
    assert cache.mode == "off"
    assert conf[JAVA_OPTIONS] == theirs


def test_a_crash_with_the_archive_removes_it(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    archive = _create(settings, env)
    cache, _ = _plan(settings, env)
    lines = ["#", f"# {class_cache.FATAL_BANNER}:", "#  SIGSEGV (0xb) at pc=0x00007f", "# Problematic frame:"]

    note, _ = cache.finish(lines, succeeded=False, result_seen=False)

    assert note and "crashed" in note and "recreates" in note
    assert not archive.exists()
    assert _plan(settings, env)[0].mode == "create"


def test_an_archive_the_jvm_refused_is_removed_and_not_recreated(
    settings: ClassCacheSettings, env: dict[str, str]
) -> None:
    archive = _create(settings, env)
    cache, _ = _plan(settings, env)

    note, _ = cache.finish(
        ["[0.010s][warning][cds] Checksum verification failed.", RESULT_LINE],
        succeeded=True,
        result_seen=True,
    )

    assert note and "did not use it" in note
    assert not archive.exists()
    again, conf = _plan(settings, env)
    assert again.mode == "off" and ".off exists" in again.reason
    assert JAVA_OPTIONS not in conf


def test_an_archive_the_jvm_could_not_write_keeps_the_jobs_result(
    settings: ClassCacheSettings, env: dict[str, str]
) -> None:
    cache, _ = _plan(settings, env)
    lines = [
        RESULT_LINE,
        "Error occurred during initialization of VM",
        "Cannot have non-empty directory in paths",
    ]

    note, dump_failed = cache.finish(lines, succeeded=False, result_seen=True)

    assert dump_failed and note
    assert _plan(settings, env)[0].mode == "off"
    assert [n for n in _files(settings) if not n.endswith(".off")] == []


def test_older_setups_archives_are_pruned(settings: ClassCacheSettings, env: dict[str, str]) -> None:
    settings.directory.mkdir(exist_ok=True)
    for i in range(3):
        old = settings.directory / f"driver-old{i}-5.jsa"
        old.write_bytes(b"12345")
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    archive = _create(settings, env)
    assert _files(settings) == sorted([archive.name, "driver-old2-5.jsa"])


def _command(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], **connection: str | None) -> list[str]:
    """The spark-submit command line SparkJobHook's direct path would run."""
    from airflow_tablemgmt.hooks.spark_class_cache import plan_class_cache
    from airflow_tablemgmt.hooks.spark_submit_direct import DirectSparkSubmit, SparkConnection

    hook = DirectSparkSubmit(
        SparkConnection(master="local[2]", **connection),  # type: ignore[arg-type]
        conf=dict(CONF),
        jars=None,
        packages=None,
        name="tms",
        application_args=[],
        env_vars=env,
    )
    cache = plan_class_cache(hook, dict(CONF), [], None, env)
    if cache is not None:
        cache.release()
    return hook.command("/x/job_main.py")


def test_the_settings_reach_the_command_line(
    monkeypatch: pytest.MonkeyPatch, settings: ClassCacheSettings, env: dict[str, str]
) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE_DIR", str(settings.directory))
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "true")
    archive = _create(settings, env)
    assert f"{JAVA_OPTIONS}=-XX:SharedArchiveFile={archive} -XX:+VerifySharedSpaces" in _command(
        monkeypatch, env
    )
    # cluster deploy mode: the driver runs elsewhere
    assert not any(JAVA_OPTIONS in a for a in _command(monkeypatch, env, deploy_mode="cluster"))
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "False")
    assert not any(JAVA_OPTIONS in a for a in _command(monkeypatch, env))


def test_the_settings_default_to_on_in_the_users_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablemgmt.hooks.airflow_settings import jvm_class_cache_settings

    monkeypatch.delenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", raising=False)
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE_DIR", raising=False)
    assert jvm_class_cache_settings() == (True, None)
    assert ClassCacheSettings().directory == Path("~/.cache/airflow-tablemgmt/jvm").expanduser()
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "off")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE_DIR", "/srv/jvm")
    assert jvm_class_cache_settings() == (False, "/srv/jvm")
