"""Provider metadata: the single source of truth Airflow reads through the `apache_airflow_provider` entry point."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        # Must equal the distribution name, or `airflow providers list` fails.
        "package-name": "airflow-provider-tablemgmt",
        "name": "Table Management",
        "description": "Scheduled, stateful, observable maintenance of lakehouse tables (Iceberg) on Spark.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Table Management",
                "external-doc-url": "https://iceberg.apache.org/docs/latest/spark-procedures/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Table Management",
                "python-modules": ["airflow_tablemgmt.operators.maintenance"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Table Management",
                "python-modules": ["airflow_tablemgmt.hooks.tablemgmt", "airflow_tablemgmt.hooks.spark_job"],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_tablemgmt.hooks.tablemgmt.TableMgmtHook",
                "connection-type": "tablemgmt",
                "hook-name": "Table Management store",
                "conn-fields": {
                    "url": {
                        "label": "Store URL",
                        "schema": {
                            "type": ["string", "null"],
                            "description": "SQLAlchemy URL of the metadata store, e.g. "
                            "postgresql+psycopg2://user@host:5432/db or sqlite:////path/tablemgmt.db",
                        },
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "login", "password", "port", "extra"],
                    "relabeling": {},
                    "placeholders": {"url": "postgresql+psycopg2://airflow@postgres:5432/tablemgmt"},
                },
            }
        ],
    }
