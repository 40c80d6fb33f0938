"""Provider metadata: the single source of truth Airflow reads through the `apache_airflow_provider` entry point."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt import __version__
from airflow_tablemgmt.provider_config import SECTION


def get_provider_info() -> dict[str, Any]:
    return {
        # Must equal the distribution name, or `airflow providers list` fails.
        "package-name": "airflow-provider-tablemgmt",
        "name": "Table Management",
        "description": "Scheduled, stateful, observable maintenance of lakehouse tables of every installed table format (built in, or a format plugin's) on Spark.",
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
                "python-modules": [
                    "airflow_tablemgmt.operators.maintenance",
                    "airflow_tablemgmt.operators.gate",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Table Management",
                "python-modules": ["airflow_tablemgmt.sensors.snapshot"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Table Management",
                "python-modules": [
                    "airflow_tablemgmt.triggers.snapshot",
                    "airflow_tablemgmt.triggers.snapshot_changed",
                ],
            }
        ],
        "asset-uris": [
            {
                "schemes": ["tablemgmt"],
                "handler": "airflow_tablemgmt.assets.uri.sanitize_uri",
            }
        ],
        # The [tablemgmt] section: every option the package reads (airflow config list --section tablemgmt).
        "config": SECTION,
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
                # The store URL carries the database password, so it is a sensitive field: "dsn" is on
                # Airflow's sensitive-name list (the API redacts it in `extra`) and format "password"
                # masks it in the connection form. The hook still reads the older `url` extra.
                "conn-fields": {
                    "dsn": {
                        "label": "Store URL",
                        "schema": {
                            "type": ["string", "null"],
                            "format": "password",
                            "description": "SQLAlchemy URL of the metadata store, e.g. "
                            "postgresql+psycopg2://user:password@host:5432/tablemgmt "
                            "(or without the password, given in the Password field)",
                        },
                    },
                    "allow_local_sqlite": {
                        "label": "Allow a SQLite store with a multi-host executor",
                        "schema": {
                            "type": ["boolean", "null"],
                            "default": False,
                            "description": "Only for a SQLite file on storage every worker shares",
                        },
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "login", "port", "extra"],
                    "relabeling": {"password": "Store password (optional)"},
                    "placeholders": {"dsn": "postgresql+psycopg2://airflow@postgres:5432/tablemgmt"},
                },
            }
        ],
    }
