"""Test-wide Airflow settings: an isolated AIRFLOW_HOME, set before anything imports airflow."""

from __future__ import annotations

import os
import tempfile

_HOME = tempfile.mkdtemp(prefix="tms-airflow-home-")
os.environ["AIRFLOW_HOME"] = _HOME
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = os.path.join(_HOME, "dags")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = '{"conn_type": "spark", "host": "local[2]"}'
os.environ["TABLEMGMT_STORE_URL"] = f"sqlite:///{os.path.join(_HOME, 'tablemgmt.db')}"
os.makedirs(os.environ["AIRFLOW__CORE__DAGS_FOLDER"], exist_ok=True)
