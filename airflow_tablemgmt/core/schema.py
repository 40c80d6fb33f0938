"""The JSON Schema of a declarations file (``tables.yaml``), built from the models that validate it.

Editors use it to complete and check declarations as they are typed (``tablemgmt schema`` prints it; a
``# yaml-language-server: $schema=...`` first line points the YAML language server at it). It is
generated, never written by hand: the models in this package stay the one definition, and the schema
follows them. It is deliberately a little looser than validation (cross-field rules such as "a hadoop
catalog needs a warehouse", identifier syntax and query checks stay with the models), never stricter:
a document the models accept is valid against it.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, models_json_schema
from pydantic_core import core_schema

from airflow_tablemgmt.core.actions import ACTIONS, REFRESH
from airflow_tablemgmt.core.durations import DURATION_RULE, format_duration
from airflow_tablemgmt.core.dynamic import DynamicTableSpec
from airflow_tablemgmt.core.policies import Policy
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_DURATION = {
    "type": "string",
    "description": DURATION_RULE,
    "examples": ["30d", "24h", "90m", "45s"],
}


class _Generator(GenerateJsonSchema):
    """Durations as people write them ('3d'), not ISO 8601 ('PT72H'), defaults included."""

    def timedelta_schema(self, schema: core_schema.TimedeltaSchema) -> dict[str, Any]:
        return dict(_DURATION)

    def encode_default(self, dft: Any) -> Any:
        if isinstance(dft, timedelta):
            return format_duration(dft)
        return super().encode_default(dft)


def _action_settings_schema() -> dict[str, Any]:
    """``actions:`` of a table: one property per registered action, each with its own settings
    (``refresh`` belongs to dynamic tables only)."""
    properties: dict[str, Any] = {}
    for name in ACTIONS.names():
        if name == REFRESH.name:
            continue
        action = ACTIONS.get(name)
        ref = f"#/$defs/{action.settings_model.__name__}"
        properties[name] = {"description": action.description, "$ref": ref}
    return {
        "type": "object",
        "description": "the table's actions, each with its options ({} for the defaults)",
        "properties": properties,
        "additionalProperties": False,
    }


def _catalogs_schema(defs: dict[str, Any]) -> dict[str, Any]:
    """A list of catalogs, or a mapping ``name: {type, warehouse, properties}``."""
    body = copy.deepcopy(defs["CatalogSpec"])
    body["properties"].pop("name", None)
    body["required"] = [r for r in body.get("required", []) if r != "name"]
    if not body["required"]:
        body.pop("required")
    body["title"] = "CatalogBody"
    defs["CatalogBody"] = body
    return {
        "description": "the catalogs the tables name: a list, or a mapping from catalog name to its settings",
        "anyOf": [
            {"type": "array", "items": {"$ref": "#/$defs/CatalogSpec"}},
            {
                "type": "object",
                "additionalProperties": {"anyOf": [{"$ref": "#/$defs/CatalogBody"}, {"type": "null"}]},
            },
        ],
    }


def _dynamic_table_schema(defs: dict[str, Any]) -> None:
    """``identifier: cat.ns.name`` may replace the three parts, and Flink's
    ``partition.fields.<column>.date-formatter`` keys may replace ``partition-fields``."""
    spec = defs["DynamicTableSpec"]
    parts = ["catalog", "namespace", "name"]
    spec["properties"]["identifier"] = {
        "type": "string",
        "pattern": r"^[^.]+\.[^.]+\.[^.]+$",
        "description": "catalog.namespace.name (instead of catalog, namespace and name)",
    }
    spec["patternProperties"] = {
        r"^partition\.fields\.[^.]+\.date-formatter$": {
            "type": "string",
            "description": "Flink's spelling of partition-fields.<column>.date-formatter",
        }
    }
    spec["required"] = [r for r in spec.get("required", []) if r not in parts]
    spec["anyOf"] = [{"required": parts}, {"required": ["identifier"]}]


def declarations_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a declarations document."""
    models: list[type[BaseModel]] = [TableSpec, CatalogSpec, DynamicTableSpec, Policy]
    models += [ACTIONS.get(n).settings_model for n in ACTIONS.names() if n != REFRESH.name]
    _, top = models_json_schema(
        [(m, "validation") for m in models],
        by_alias=True,
        ref_template="#/$defs/{model}",
        schema_generator=_Generator,
    )
    defs: dict[str, Any] = top["$defs"]
    defs["TableSpec"]["properties"]["actions"] = _action_settings_schema()
    defs["Policy"]["properties"]["actions"] = _action_settings_schema() | {
        "description": "the actions the policy's tables get, each with its options (a table's actions: shape)"
    }
    _dynamic_table_schema(defs)
    return {
        "$schema": DIALECT,
        "title": "airflow-tablemgmt declarations (tables.yaml)",
        "description": "Catalogs, tables, dynamic tables and policies declared as code beside the DAG file; "
        "each (table, enabled action) becomes a DAG. Generated by `tablemgmt schema`.",
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            "version": {"const": 1, "description": "the format's version (1)"},
            "catalogs": _catalogs_schema(defs),
            "tables": {
                "anyOf": [{"type": "array", "items": {"$ref": "#/$defs/TableSpec"}}, {"type": "null"}]
            },
            "dynamic-tables": {
                "anyOf": [{"type": "array", "items": {"$ref": "#/$defs/DynamicTableSpec"}}, {"type": "null"}]
            },
            "policies": {
                "description": "maintenance for every table that matches (docs/policies.md)",
                "anyOf": [{"type": "array", "items": {"$ref": "#/$defs/Policy"}}, {"type": "null"}],
            },
        },
        "$defs": dict(sorted(defs.items())),
    }
