"""Delta Lake maintainers: ``OPTIMIZE`` (bin-pack, ``ZORDER BY``, a partition filter) and ``VACUUM`` (never
below Delta's retention check; a dry run lists what a real run deletes). The table is path-based
(``delta.`<location>```), in a session built with Delta's extensions and ``DeltaCatalog`` only."""

from __future__ import annotations

import json
from typing import Any

from airflow_tablemgmt.formats.delta.job.optimize import optimize
from airflow_tablemgmt.formats.delta.job.vacuum import vacuum

#: What the job runs for each action (the descriptor's session names this module).
MAINTAINERS = {"optimize": optimize, "vacuum": vacuum}

#: The session setting Delta copies into each commit's ``commitInfo.userMetadata`` (a session setting: right
#: on Spark Connect too, whose sessions are per job).
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def mark_commits(spark: Any, mark: dict[str, str], *, remote: bool) -> None:
    spark.conf.set(USER_METADATA, json.dumps(mark, sort_keys=True))


def unmark_commits(spark: Any, *, remote: bool) -> None:
    spark.conf.unset(USER_METADATA)


__all__ = ["MAINTAINERS", "USER_METADATA", "mark_commits", "unmark_commits"]
