"""The ``paimon`` format's descriptor: what Paimon tables get and where its code is, registered under the
``airflow_tablemgmt.formats`` entry point (this plugin's pyproject.toml), exactly as the built-in formats are.
It imports only the declaration API and the plugin's own actions; the factory, the readers and the driver
side are named for first use."""

from __future__ import annotations

from airflow_tablemgmt.formats.api import Format, Interval, TriggerStrategy
from tablemgmt_paimon import FORMAT
from tablemgmt_paimon.actions import ACTIONS
from tablemgmt_paimon.session import SESSION

#: Not snapshot-gated by the service (its gate reads the catalogs' own format): the factory's own check runs.
STRATEGIES: dict[str, TriggerStrategy] = {
    "compact": TriggerStrategy(Interval.parse("1h"), on_new_snapshot=False, parallelism=4),
    "expire-snapshots": TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=4),
    "expire-partitions": TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
    "remove-orphans": TriggerStrategy(Interval.parse("7d"), on_new_snapshot=False, parallelism=2),
}

PAIMON = Format(
    name=FORMAT,
    title="Paimon",
    description="Apache Paimon (a filesystem catalog's warehouse, in a hadoop catalog)",
    actions=ACTIONS,
    strategies=STRATEGIES,
    session=SESSION,
    # Proven on spark-submit (tests/integration/formats/test_paimon_plugin.py); Spark Connect would need
    # Paimon's runtime on the Connect server.
    engines=("spark-submit",),
    factory="tablemgmt_paimon.factory:PaimonProcessFactory",
    health="tablemgmt_paimon.health:table_health",
    views={tab: f"tablemgmt_paimon.views:read_{tab}" for tab in ("details", "files", "snapshots")},
    root=("snapshot", "schema"),
    marker="snapshot/ and schema/",
)
