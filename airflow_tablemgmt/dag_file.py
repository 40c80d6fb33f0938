"""Kept for old import paths: users' DAG files import ``airflow_tablemgmt.dag_file.register_dags``
(``dags/tablemgmt_dags.py``). The DAG file's entry lives in :mod:`airflow_tablemgmt.dag_factory.dag_file`."""

from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build, register_dags

__all__ = ["load_registry_and_build", "register_dags"]
