"""Paimon's health hook (``Format.health`` of its descriptor, ``format.py``): a table's figures and findings read from its
snapshot files and the data files on disk (``snapshots.py``), no JVM, against the table's own settings:

* **uncompacted commits**: at least ``max(min-commits, min-new-snapshots)`` APPEND commits since the last
  compaction (``min-commits``: the compact action's threshold, 5 by default; the health gate runs ``compact``
  exactly then);
  points = 30 × min(1, commits / 20) (at least 5), fixed by ``compact``;
* **snapshots**: more snapshots than expire-snapshots' ``retain-max`` keeps (when set); 10 points, fixed by
  ``expire-snapshots``.

A table that is not on a local warehouse raises ``HealthUnavailable`` (the page shows why).
"""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.formats.api import Finding, FormatHealth, HealthUnavailable
from tablemgmt_paimon import FORMAT
from tablemgmt_paimon.snapshots import NotReadable, read_table, table_location

#: Commits since the last compaction below which a compaction is not flagged, however low min-new-snapshots.
MIN_COMMITS_FLAGGED = 5


def _setting(table: Any, action: str, name: str, default: Any) -> Any:
    return getattr(table.action_settings(action), name, default) if action in table.actions else default


def table_health(catalog: Any, table: Any) -> FormatHealth:
    try:
        state = read_table(table_location(catalog.warehouse or "", table.namespace, table.name))
    except NotReadable as e:
        raise HealthUnavailable(f"table {table.id}: {e}") from None
    figures: dict[str, Any] = dict(state.figures())
    figures["data_files"] = figures.pop("data_files_on_disk")
    figures["data_bytes"] = figures.pop("data_bytes_on_disk")
    findings = []
    commits = state.commits_since_compaction()
    min_commits = MIN_COMMITS_FLAGGED
    if "compact" in table.actions:
        min_commits = int(table.action_settings("compact").thresholds.get("min-commits", MIN_COMMITS_FLAGGED))
    threshold = max(min_commits, int(_setting(table, "compact", "min_new_snapshots", 1)))
    figures["commits_since_compaction"] = commits
    figures["thresholds"] = {"min-commits": threshold}
    if commits >= threshold:
        findings.append(
            Finding(
                "uncompacted_commits",
                max(5, round(30 * min(1.0, commits / 20))),
                "compact",
                f"{commits} commits since the last compaction ({figures['data_files']} data files on disk)",
            )
        )
    retain_max = _setting(table, "expire-snapshots", "retain_max", None)
    if retain_max is not None and len(state.snapshots) > int(retain_max):
        findings.append(
            Finding(
                "snapshots",
                10,
                "expire-snapshots",
                f"{len(state.snapshots)} snapshots where expire-snapshots keeps {retain_max} (retain-max)",
            )
        )
    return FormatHealth(FORMAT, figures, tuple(findings))
