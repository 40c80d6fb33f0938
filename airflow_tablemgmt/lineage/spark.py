"""The OpenLineage parent run handed to the Spark job, as ``SparkSubmitOperator`` hands it: with
``[openlineage] spark_inject_parent_job_info = True`` (the OpenLineage provider's own option), the job's
Spark conf carries ``spark.openlineage.parentJobNamespace/parentJobName/parentRunId`` (and the root run),
so Spark's OpenLineage listener, when the cluster runs it, links its events to this task's run.

Gated on the provider: without it, or with the option off, nothing is added. Never fails a task.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def parent_job_conf(context: Any) -> dict[str, str]:
    """Spark properties naming this task's OpenLineage run, or ``{}`` when not asked for. The option is read
    first: the provider's Spark utilities import its listener (seconds at load), which a task with the
    option off (the default) never needs."""
    try:
        from airflow.configuration import conf
    except ImportError:
        return {}
    try:
        if not conf.getboolean("openlineage", "spark_inject_parent_job_info", fallback=False):
            return {}
        from airflow.providers.openlineage.utils.spark import (
            inject_parent_job_information_into_spark_properties,
        )

        injected = inject_parent_job_information_into_spark_properties({}, context)
    except ImportError:  # the OpenLineage provider is not installed
        return {}
    except Exception:  # noqa: BLE001 - lineage is informative: never fail a maintenance run over it
        log.warning("tablemgmt: could not add the OpenLineage parent job to the Spark conf", exc_info=True)
        return {}
    return {str(k): str(v) for k, v in injected.items() if str(k).startswith("spark.openlineage.")}
