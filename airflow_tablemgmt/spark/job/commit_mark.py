"""Which process attempt made a commit, written into the commit itself.

A worker that dies after its job committed but before the store recorded it leaves the result in its
local result file (``lifecycle/results.py``), which a recovering worker on another host cannot see. So the
job also marks its commits in the table's own metadata, and recovery reads the mark from the table
(``lifecycle/table_marks.py``): a committed job is recorded, never run again.

* Iceberg: ``org.apache.iceberg.EnvironmentContext`` -- every snapshot Iceberg produces (a procedure's
  rewrite, a DataFrame write) copies its entries into the snapshot's summary. Iceberg 1.10's procedures
  take no snapshot properties (``CommitMetadata`` reaches DataFrame writes only), and the context is
  global to the JVM, so it is set only in a spark-submit driver, which runs one job; never on a shared
  Spark Connect server.
* Delta: the session's ``spark.databricks.delta.commitInfo.userMetadata``, which lands in each commit's
  ``commitInfo`` (a session setting: also right on Connect, whose sessions are per job).
* Hudi: a compaction commit's extra metadata (:func:`hudi_extra`). ``run_compaction`` commits with
  ``Option.empty()`` and Hudi 1.0's compaction copies nothing from its plan or a setting, so the
  compaction maintainer executes the instant through Hudi's write client in the driver JVM (spark-submit
  only) and commits it with the mark (``maintainers/hudi/compaction.py``). Hudi's clustering, clean and
  archive carry no mark: their commits take no extra metadata from a procedure, a plan or a setting.
* Paimon (the plugin): the snapshot's ``commitUser``. Paimon 0.9's snapshot has no properties, but its
  ``commit.user-prefix`` table option (passed as ``sys.compact``'s ``options``) starts every commit user
  of the procedure's commit: :func:`commit_user_prefix`, read back by :func:`parse_text`.

The job's current mark is :func:`current` (``None`` outside a process): the maintainers and, through
``spark/job/plugins.py``, a plugin's maintainers read it.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.core.factory import JobSpec

log = logging.getLogger(__name__)

PROCESS = "tablemgmt.process-id"
ATTEMPT = "tablemgmt.attempt"
ACTION = "tablemgmt.action"
DELTA_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
#: A commit user (Paimon) that names the attempt: ``tablemgmt.<process>.<attempt>.<action>``, then
#: whatever the format appends (Paimon: ``_<uuid>``).
_USER = re.compile(r"^tablemgmt\.(?P<process>\d+)\.(?P<attempt>\d+)\.(?P<action>[A-Za-z0-9-]+)(?:_.*)?$")

_CURRENT: dict[str, str] | None = None


def mark_of(job: JobSpec) -> dict[str, str] | None:
    """The mark of ``job``'s commits; None for a job outside a process (a run by hand)."""
    if job.process_id is None:
        return None
    return {PROCESS: str(job.process_id), ATTEMPT: str(job.attempt), ACTION: job.action}


def apply(spark: SparkSession, job: JobSpec, *, remote: bool) -> None:
    """Mark the commits ``job`` is about to make (best effort: a mark never fails a job)."""
    global _CURRENT
    mark = mark_of(job)
    if mark is None:
        return
    _CURRENT = dict(mark)
    try:
        spark.conf.set(DELTA_USER_METADATA, json.dumps(mark, sort_keys=True))
    except Exception:  # noqa: BLE001
        log.debug("could not set Delta's commit user metadata", exc_info=True)
    if remote:
        return
    try:
        context = _environment_context(spark)
        for key, value in mark.items():
            context.put(key, value)
    except Exception:  # noqa: BLE001 - no Iceberg on the classpath, or no JVM: nothing to mark
        log.debug("could not set Iceberg's environment context", exc_info=True)


def clear(spark: SparkSession, job: JobSpec, *, remote: bool) -> None:
    """Take the mark off again (the session may outlive the job: tests, an embedded caller)."""
    global _CURRENT
    if mark_of(job) is None:
        return
    _CURRENT = None
    try:
        spark.conf.unset(DELTA_USER_METADATA)
    except Exception:  # noqa: BLE001
        log.debug("could not unset Delta's commit user metadata", exc_info=True)
    if remote:
        return
    try:
        context = _environment_context(spark)
        for key in (PROCESS, ATTEMPT, ACTION):
            context.remove(key)
    except Exception:  # noqa: BLE001
        log.debug("could not clear Iceberg's environment context", exc_info=True)


def _environment_context(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - the JVM-wide context has no Python API
    assert jvm is not None
    return jvm.org.apache.iceberg.EnvironmentContext


def current() -> dict[str, str] | None:
    """The mark of the job running in this driver (set by :func:`apply`), None outside a process."""
    return None if _CURRENT is None else dict(_CURRENT)


def hudi_extra(mark: dict[str, str] | None = None) -> dict[str, str]:
    """The extra metadata a Hudi plan carries into its commit: the mark's entries, as Iceberg's."""
    mark = current() if mark is None else mark
    return dict(mark or {})


def commit_user_prefix(mark: dict[str, str] | None = None) -> str | None:
    """A commit-user prefix naming the job's attempt (Paimon's ``commit.user-prefix``); None outside a
    process. Only digits, letters, dots and dashes: it is read back from the snapshot by :func:`parse_text`."""
    mark = current() if mark is None else mark
    if not mark or not re.fullmatch(r"[A-Za-z0-9-]+", mark[ACTION]):
        return None
    return f"tablemgmt.{mark[PROCESS]}.{mark[ATTEMPT]}.{mark[ACTION]}"


def parse_text(text: str | None) -> dict[str, str] | None:
    """A mark from its text in a commit: the JSON object of Delta's ``userMetadata`` or a commit user
    :func:`commit_user_prefix` started; None when the text names no attempt."""
    if not text:
        return None
    m = _USER.match(text)
    if m is not None:
        return {PROCESS: m["process"], ATTEMPT: m["attempt"], ACTION: m["action"]}
    try:
        mark = json.loads(text)
    except ValueError:
        return None
    return mark if isinstance(mark, dict) else None
