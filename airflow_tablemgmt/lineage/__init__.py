"""OpenLineage for maintenance and refresh tasks, through Airflow's OpenLineage provider (``[openlineage]``
extra). Nothing here is imported unless that provider is installed and configured; see docs/lineage.md."""
