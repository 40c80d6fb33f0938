"""The real Airflow api-server app with the simple auth manager, users admin and viewer, our plugin
mounted by its entry point, and helpers to log in."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PASSWORDS = {"admin": "admin-pw", "viewer": "viewer-pw"}


def configure_airflow(tmp: Path) -> None:
    """Simple auth manager settings; Airflow reads them from the environment on each lookup."""
    pw_file = tmp / "passwords.json"
    pw_file.write_text(json.dumps(PASSWORDS))
    os.environ.update(
        {
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(pw_file),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__API_AUTH__JWT_SECRET": "tablemgmt-test-secret-0123456789abcdef",
            "AIRFLOW__API__SECRET_KEY": "tablemgmt-test-key",
        }
    )


def build_app():  # type: ignore[no-untyped-def]
    from airflow import plugins_manager
    from airflow.api_fastapi.app import create_app, purge_cached_app

    purge_cached_app()
    for name in ("_get_plugins", "get_fastapi_plugins"):  # loaded once per process; ours must be in
        cached = getattr(plugins_manager, name, None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    return create_app("core")


def login(client, user: str) -> str:  # type: ignore[no-untyped-def]
    r = client.post("/auth/token", json={"username": user, "password": PASSWORDS[user]})
    assert r.status_code == 201, r.text
    return str(r.json()["access_token"])


def sync_dags(dags_folder: Path) -> None:
    """Parse the DAG file and write its DAGs to Airflow's DB, as the dag processor would."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

    dags_folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", dags_folder / "tablemgmt_dags.py")
    DagBundlesManager().sync_bundles_to_db()
    bag = BundleDagBag(dag_folder=str(dags_folder), bundle_path=dags_folder, bundle_name="dags-folder")
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, "dags-folder", None)
