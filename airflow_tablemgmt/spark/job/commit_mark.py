"""Which process attempt made a commit, written into the commit itself.

A worker that dies after its job committed but before the store recorded it leaves the result in its
local result file (``lifecycle/results.py``), which a recovering worker on another host cannot see. So the
job also marks its commits in the table's own metadata, and recovery reads the mark from the table
(``lifecycle/table_marks.py``): a committed job is recorded, never run again.

Each format puts the mark where its commits carry it, in its driver-side module (``mark_commits`` and
``unmark_commits`` of ``formats/<format>/job``, called by :func:`apply` and :func:`clear`; a maintainer that
commits by itself reads :func:`current` or :func:`entries`), and reads it back in ``formats/<format>/marks.py``.
A commit user naming the attempt (:func:`commit_user_prefix`, Paimon's) and a JSON mark are parsed by
:func:`parse_text`.

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
#: A commit user (Paimon) that names the attempt: ``tablemgmt.<process>.<attempt>.<action>``, then
#: whatever the format appends (Paimon: ``_<uuid>``).
_USER = re.compile(r"^tablemgmt\.(?P<process>\d+)\.(?P<attempt>\d+)\.(?P<action>[A-Za-z0-9-]+)(?:_.*)?$")

_CURRENT: dict[str, str] | None = None


def mark_of(job: JobSpec) -> dict[str, str] | None:
    """The mark of ``job``'s commits; None for a job outside a process (a run by hand)."""
    if job.process_id is None:
        return None
    return {PROCESS: str(job.process_id), ATTEMPT: str(job.attempt), ACTION: job.action}


def apply(spark: SparkSession, job: JobSpec, *, remote: bool, module: Any = None) -> None:
    """Mark the commits ``job`` is about to make (best effort: a mark never fails a job): the job's mark is
    :func:`current` for its maintainers, and the format's driver-side ``module`` puts it where its commits
    carry it (its ``mark_commits(spark, mark, remote=...)``, if it has one)."""
    global _CURRENT
    mark = mark_of(job)
    if mark is None:
        return
    _CURRENT = dict(mark)
    hook = getattr(module, "mark_commits", None)
    try:
        if hook is not None:
            hook(spark, dict(mark), remote=remote)
    except Exception:  # noqa: BLE001 - a commit left unmarked is run again on recovery, as before marks
        log.debug("could not mark the job's commits", exc_info=True)


def clear(spark: SparkSession, job: JobSpec, *, remote: bool, module: Any = None) -> None:
    """Take the mark off again (the session may outlive the job: tests, an embedded caller)."""
    global _CURRENT
    if mark_of(job) is None:
        return
    _CURRENT = None
    hook = getattr(module, "unmark_commits", None)
    try:
        if hook is not None:
            hook(spark, remote=remote)
    except Exception:  # noqa: BLE001
        log.debug("could not take the mark off the session", exc_info=True)


def current() -> dict[str, str] | None:
    """The mark of the job running in this driver (set by :func:`apply`), None outside a process."""
    return None if _CURRENT is None else dict(_CURRENT)


def entries(mark: dict[str, str] | None = None) -> dict[str, str]:
    """The mark's entries (process id, attempt, action), as a commit's key-value metadata carries them; empty
    outside a process."""
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
