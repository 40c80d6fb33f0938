"""Recovery without shared storage: did an earlier attempt commit? Ask the table.

The result file (:mod:`.results`) is local to the worker that wrote it; a retry on another host (two
Celery workers with their own ``$AIRFLOW_HOME``) cannot see it. The job also marks its commits with its
process id, attempt and action (``spark/job/commit_mark.py``), each format where its commits can carry it
(``formats/<format>/marks.py`` reads them back: ``Format.marks``; a plugin factory's ``commit_marks``). :func:`committed_in_table` reads
the table's metadata (no Spark; local or on S3 with the catalog's ``spark.hadoop.fs.s3a.*``, as the
format's health does) and returns what :func:`~.results.record_predecessor_success` records: SUCCESS
without running the job again.

A mark counts only when it names this process, this action and an earlier attempt, and was committed
after the process row was created (a process id repeats in another store). An unreadable table is no
answer: the job runs again, as it did before the mark existed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.formats import DEFAULT_FORMAT
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS, parse_text

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

log = logging.getLogger("airflow_tablemgmt.lifecycle")

#: Where a Spark Connect attempt records the commit it starts from (process parameters, by attempt).
CONNECT_BASES = "connect_bases"


def _matches(mark: dict[str, Any], process: Process, committed_ms: int | None) -> int | None:
    """The attempt ``mark`` names when it is an earlier attempt of ``process``, else None."""
    if str(mark.get(PROCESS)) != str(process.id) or mark.get(ACTION) != process.action:
        return None
    try:
        attempt = int(mark.get(ATTEMPT, 0))
    except (TypeError, ValueError):
        return None
    if not 0 < attempt < process.attempt:
        return None
    if process.created_at is not None and committed_ms is not None:
        if committed_ms < int(process.created_at.timestamp() * 1000) - 1000:  # 1 s of clock slack
            return None
    return attempt


def _commits(
    table: TableSpec, catalog: CatalogSpec, action: str
) -> Iterator[tuple[dict[str, Any], int, int]]:
    """The table's newest commits, newest first, as ``(mark, commit id, committed at ms)``: what its format's
    descriptor reads (``Format.marks``), or, for a plugin whose factory reads them, its ``commit_marks``;
    nothing for a format that marks no commit. A mark given as text is parsed (``parse_text``)."""
    from airflow_tablemgmt.core.formats import FORMATS

    fmt = FORMATS.find(table.format)
    reader: Any = fmt.load(fmt.marks) if fmt is not None and fmt.marks else None
    if reader is None:
        from airflow_tablemgmt.factories.discovery import factories_for

        factory = factories_for(table.format, action).for_action(table.format, action)
        method = getattr(factory, "commit_marks", None)
        reader = None if method is None else (lambda t, c: method(t, c))
    if reader is None:
        return
    for mark, commit_id, ts in reader(table, catalog):
        parsed = parse_text(mark) if isinstance(mark, str) else mark
        if isinstance(parsed, dict):
            yield parsed, int(commit_id), int(ts)


def _format_function(table: TableSpec, name: str) -> Any:
    """An optional function of the table's format's marks module (beside ``Format.marks``), or None."""
    import importlib

    from airflow_tablemgmt.core.formats import FORMATS

    fmt = FORMATS.find(table.format)
    if fmt is None or not fmt.marks:
        return None
    return getattr(importlib.import_module(fmt.marks.partition(":")[0]), name, None)


def _base(entry: Any) -> tuple[Any, str | None]:
    """A recorded base: ``(commit id, when it was read, by the store's clock; None when not recorded)``."""
    if isinstance(entry, dict):
        return entry.get("commit"), entry.get("at")
    return entry, None


def with_connect_base(
    table: TableSpec, catalog: CatalogSpec, process: Process, at: datetime | None = None
) -> dict[str, Any] | None:
    """``process``'s parameters with the commit its attempt starts from recorded under
    :data:`CONNECT_BASES` (a Spark Connect attempt, whose commits the format cannot mark: the lineage
    credits them, :func:`credited_connect_commit`); None when the format cannot tell or the table cannot
    be read (that attempt's commit is then not credited: a retry without its result file runs it again)."""
    newest = _format_function(table, "newest_commit")
    if newest is None:
        return None
    try:
        base = newest(table, catalog)
    except Exception as e:  # noqa: BLE001 - no base: nothing credited later, as before
        log.warning(
            "tablemgmt: process %s: could not read the commit it starts from: %s", process.id, str(e)[:300]
        )
        return None
    bases = dict((process.parameters or {}).get(CONNECT_BASES) or {})
    bases[str(process.attempt)] = {"commit": base, "at": at.isoformat() if at is not None else None}
    return {**(process.parameters or {}), CONNECT_BASES: bases}


def credited_connect_commit(
    table: TableSpec, catalog: CatalogSpec, process: Process, others: list[Process]
) -> tuple[dict[str, Any], int, int] | None:
    """The commit the lineage credits to ``process``'s last earlier attempt that ran on Spark Connect, as
    ``(mark, commit id, committed at ms)``; None when it credits none.

    The rule (the format finds the commit, ``connect_commit``): the attempt recorded the commit it started
    from, *base*, while it held the table's lease and before its first operation. Jobs on one table run one
    at a time under its lease, and the next holder starts only once the server reports the Connect job's
    operations and tasks ended, so every commit a maintenance job makes after *base* and before the next
    holder's start is that attempt's. Its commit is the first after *base* that is not an append, when it
    is the action's operation and unmarked -- unless another Connect attempt started from a commit between
    *base* and it (then that one may have made it; a spark-submit job's commits are marked). What the rule
    cannot see: a writer outside this project that commits the same operation (a compaction of its own)
    without the lease, between the attempt's start and the table's next job -- taken for the attempt's
    commit, so the job is not run again -- and a Connect attempt of another process that recorded no base
    (one started before this rule)."""
    params = process.parameters or {}
    bases = params.get(CONNECT_BASES) or {}
    apps = params.get("applications") or {}
    earlier = [
        int(a) for a in bases if int(a) < process.attempt and str(apps.get(a, "")).startswith("connect:")
    ]
    find = _format_function(table, "connect_commit")
    if not earlier or find is None:
        return None
    attempt = max(earlier)
    base, base_at = _base(bases[str(attempt)])
    found = find(table, catalog, base, process.action)
    if found is None:
        return None
    summary, commit_id, ts, between = found
    for other in others:
        if other.id == process.id:
            continue
        for entry in ((other.parameters or {}).get(CONNECT_BASES) or {}).values():
            other_base, other_at = _base(entry)
            if other_base not in between:
                continue
            if base_at is not None and other_at is not None and other_at < base_at:
                continue  # it started (and ended: the lease) before this attempt did
            return None
    if process.created_at is not None and ts < int(process.created_at.timestamp() * 1000) - 1000:
        return None
    mark = {**summary, PROCESS: str(process.id), ATTEMPT: str(attempt), ACTION: process.action}
    return mark, int(commit_id), int(ts)


def committed_in_table(
    table: TableSpec, catalog: CatalogSpec, process: Process, others: list[Process] | None = None
) -> dict[str, Any] | None:
    """The newest commit an earlier attempt of ``process`` marked in the table -- or, for an attempt on
    Spark Connect, the one the lineage credits to it (:func:`credited_connect_commit`, judged against the
    table's ``others`` processes) -- as a result record (``attempt``, ``summary``, ``snapshot_id``); None
    when there is none or the table cannot be read."""
    ident = TableIdentifier(table.catalog, table.namespace, table.name)
    credited = False
    try:
        commits = _commits(table, catalog, process.action)
        found = next(
            ((m, c, t, a) for m, c, t in commits if (a := _matches(m, process, t)) is not None), None
        )
        if found is None and others is not None:
            lineage = credited_connect_commit(table, catalog, process, others)
            if lineage is not None:
                found, credited = (*lineage, int(lineage[0][ATTEMPT])), True
    except Exception as e:  # noqa: BLE001 - no answer: the job runs again, as without the mark
        log.warning(
            "tablemgmt: process %s: could not read %s's commits for an earlier attempt's mark: %s",
            process.id,
            ident,
            str(e)[:300],
        )
        return None
    if found is None:
        return None
    summary, commit_id, ts, attempt = found
    return {
        "attempt": attempt,
        # the catalogs' own format's commit is the snapshot the watchers and the gate compare
        "snapshot_id": commit_id if str(table.format) == DEFAULT_FORMAT else None,
        "application_id": None,
        "summary": {
            "recorded_from_table": True,
            "committed_commit": commit_id,
            "committed_at_ms": ts,
            "operation": summary.get("operation"),
            **({"credited_by": "lineage"} if credited else {}),
            "note": "the attempt that committed could not record its result, and its result file is not "
            "on this host; "
            + (
                "its Spark Connect commit is the first after the one it started from (the lease's order)"
                if credited
                else "the table's commit metadata names it"
            )
            + ", so the job was not run again",
        },
    }
