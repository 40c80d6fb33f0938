"""airflow-tablemgmt: one maintenance DAG per (registered table, enabled action).

Tables come from tables.yaml beside this file and from `tablemgmt register` / the REST API.
"""

from pathlib import Path

from airflow_tablemgmt.dag_file import register_dags

register_dags(globals(), tables_yaml=Path(__file__).with_name("tables.yaml"))
