"""The REST contract's schema modules: each stays under the project's 400-line module limit, and the
dynamic tables' bodies (api/dynamic_schemas.py, split from api/schemas.py) are what the OpenAPI document
names for /dynamic-tables, under the same component names as before the split."""

from __future__ import annotations

from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[3] / "airflow_tablemgmt" / "api"


@pytest.mark.parametrize("module", ["schemas.py", "dynamic_schemas.py"])
def test_a_schema_module_is_under_400_lines(module: str) -> None:
    lines = (API / module).read_text().count("\n")
    assert lines < 400, f"api/{module} has {lines} lines"


def test_the_dynamic_routes_document_the_dynamic_schemas() -> None:
    from airflow_tablemgmt.api import dynamic_schemas
    from airflow_tablemgmt.api.app import create_api_app

    doc = create_api_app().openapi()
    components = doc["components"]["schemas"]
    names = (
        "AlterIn ClusterInfoOut DroppedOut DynamicTableCreatedOut DynamicTableIn DynamicTableOut "
        "DynamicTablePage DynamicTableSummaryOut RefreshIn RefreshJobOut RefreshOut ResumeIn"
    ).split()
    for name in names:
        assert name in components, name
        model = getattr(dynamic_schemas, name)
        assert set(components[name]["properties"]) == set(model.model_json_schema()["properties"]), name
    paths = doc["paths"]
    patch = paths["/dynamic-tables/{table_id}"]["patch"]
    assert patch["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AlterIn"
    }
    post = paths["/dynamic-tables"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert post == {"$ref": "#/components/schemas/DynamicTableIn"}
