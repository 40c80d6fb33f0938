"""Delta Lake maintainers: ``OPTIMIZE`` (bin-pack, ``ZORDER BY``, a partition filter) and ``VACUUM`` (never
below Delta's retention check; a dry run lists what a real run deletes). The table is path-based
(``delta.`<location>```), in a session built with Delta's extensions and ``DeltaCatalog`` only."""

from __future__ import annotations

from airflow_tablemgmt.formats.delta.job.optimize import optimize
from airflow_tablemgmt.formats.delta.job.vacuum import vacuum

#: What the job runs for each action (the descriptor's session names this module).
MAINTAINERS = {"optimize": optimize, "vacuum": vacuum}

__all__ = ["MAINTAINERS"]
