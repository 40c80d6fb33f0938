"""The driver's class-data archive for a job SparkJobHook submits: whether the job maps one (its JVM options
put into the hook's conf) and, when there is none for its set-up yet, the detached run that writes it
(``spark/launch/class_cache.py``, ``spark/launch/archive_builder.py``). An optimisation: nothing here
fails a job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_tablemgmt.hooks.airflow_settings import jvm_class_cache_settings
from airflow_tablemgmt.hooks.spark_submit_direct import DirectSparkSubmit
from airflow_tablemgmt.spark.launch.class_cache import DriverClassCache


def plan_class_cache(
    hook: Any, conf: dict[str, str], jars: list[str], packages: str | None, env: dict[str, str]
) -> DriverClassCache | None:
    """Decide on the driver's class-data archive (see ``spark/launch/class_cache.py``) and put its JVM
    options into the hook's conf; None when it does not apply. Cluster deploy mode is read from the
    connection the hook resolved."""
    from airflow_tablemgmt.spark.launch import class_cache

    if isinstance(hook, DirectSparkSubmit):
        deploy_mode = hook.connection.deploy_mode
    else:
        deploy_mode = hook._connection.get("deploy_mode")
    try:
        enabled, directory = jvm_class_cache_settings()
    except Exception as e:  # noqa: BLE001 - an optimisation never fails a job
        hook.log.info("tablemgmt: JVM class cache: off (its settings could not be read: %s)", e)
        return None
    settings = class_cache.ClassCacheSettings(enabled=enabled)
    if directory:
        settings = class_cache.ClassCacheSettings(enabled=enabled, directory=Path(directory).expanduser())
    cache, submitted = class_cache.plan(
        settings=settings,
        conf=conf,
        jars=jars,
        packages=packages,
        env=env,
        cluster=deploy_mode == "cluster",
        # ~50 ms (a CRC of the ~130 MB archive) buys a fallback to no sharing, instead of a crash or
        # wrong class metadata, when the file was damaged after it was written.
        verify=True,
    )
    hook.log.info("tablemgmt: %s", cache.describe())
    if cache.mode == "create":
        # A JVM writes the archive while it exits: 10 s on a quiet host, minutes under load, which at
        # a job's exit held its slot and lease. This job runs without one; after it succeeded a run
        # of its own writes it (spark/launch/archive_builder.py) and the next jobs map it.
        cache.release()
        hook.log.info("tablemgmt: JVM class cache: this job runs without it; written after the job")
        return cache
    if submitted is not conf:
        if isinstance(hook, DirectSparkSubmit):
            hook.conf = submitted
        else:
            hook._conf = submitted
    return cache if cache.mode != "off" else None


def request_archive(
    hook: Any, conf: dict[str, str], jars: list[str], packages: str | None, env: dict[str, str]
) -> None:
    """Start the detached run that writes this set-up's class archive; never fails the job."""
    from airflow_tablemgmt.spark.launch import archive_builder, class_cache

    try:
        _, directory = jvm_class_cache_settings()
        where = Path(directory).expanduser() if directory else class_cache.ClassCacheSettings().directory
        # The job's own settings and jars (the archive's key), not its lineage parent run.
        own = {k: v for k, v in conf.items() if not k.startswith("spark.openlineage.")}
        pid = archive_builder.request(directory=where, conf=own, jars=jars, packages=packages, env=env)
        hook.log.info(
            "tablemgmt: JVM class cache: writing it in a run of its own (pid %d, log %s)",
            pid,
            where / archive_builder.LOG_NAME,
        )
    except Exception as e:  # noqa: BLE001 - an optimisation never fails a job
        hook.log.warning("tablemgmt: JVM class cache: could not start writing it: %s", e)
