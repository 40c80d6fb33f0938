"""A dynamic table in a multi-level namespace (``lake.agg.eu.daily``), as REST catalogs such as Nessie and
Polaris nest them, like a maintained table's (tests/unit/core/test_identifiers_namespaces.py): its
definition, its sources, its refresh DAG and the asset a downstream table waits for. Three-part ids are
unchanged."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.dynamic import DynamicTableSpec, named_tables, parse_dynamic_table
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.identifiers import TableIdentifier

DAILY = "lake.agg.eu.daily"
SOURCE = "lake.sales.eu.orders"


def _spec(**over: object) -> dict[str, object]:
    return {
        "identifier": DAILY,
        "query": f"SELECT day, count(*) AS n FROM {SOURCE} GROUP BY day",
        "freshness": "1 DAY",
        **over,
    }


def test_an_identifier_of_four_parts_is_catalog_a_dotted_namespace_and_the_table() -> None:
    spec = parse_dynamic_table(_spec(**{"source-tables": [SOURCE]}))
    assert (spec.catalog, spec.namespace, spec.name) == ("lake", "agg.eu", "daily")
    assert spec.id == DAILY and spec.identifier == TableIdentifier.parse(DAILY)
    assert spec.identifier.quoted == "`lake`.`agg`.`eu`.`daily`"
    assert spec.source_tables == [SOURCE]
    # the three fields given separately mean the same table
    apart = {"catalog": "lake", "namespace": "agg.eu", "name": "daily"}
    same = parse_dynamic_table({k: v for k, v in _spec().items() if k != "identifier"} | apart)
    assert same.id == DAILY and same.namespace == "agg.eu"


def test_its_maintenance_view_is_a_table_spec_in_that_namespace() -> None:
    view = parse_dynamic_table(_spec()).table_spec()
    assert (view.id, view.namespace, view.identifier.namespace_parts) == (DAILY, "agg.eu", ("agg", "eu"))
    assert view.action_settings("refresh").interval == "0 0 * * *"


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"identifier": "lake.agg..daily"}, r"namespace: 'agg\.' is not a valid namespace"),
        ({"identifier": "lake.agg.e u.daily"}, "namespace: 'agg.e u' is not a valid namespace"),
        (
            {"identifier": "lake.daily"},
            "identifier: 'lake.daily' must be written catalog.namespace.name "
            r"\(a namespace of several levels is written with dots too",
        ),
        (
            {"identifier": None, "catalog": "lake", "namespace": "agg..eu", "name": "daily"},
            "namespace: 'agg..eu' is not a valid namespace",
        ),
        ({"source-tables": ["lake.sales..orders"]}, r"source-tables: namespace: 'sales\.' is not a valid"),
    ],
)
def test_a_bad_level_names_the_field_and_the_rule(over: dict[str, object], message: str) -> None:
    data = {k: v for k, v in {**_spec(), **over}.items() if v is not None}
    with pytest.raises(InvalidDeclaration, match=message):
        parse_dynamic_table(data, "def.json")


def test_a_downstream_table_finds_its_multi_level_upstream() -> None:
    weekly = DynamicTableSpec.model_validate(
        {
            "identifier": "lake.agg.eu.weekly",
            "query": f"SELECT * FROM `lake`.agg.`eu`.daily JOIN {SOURCE} USING (day)",
            "freshness": "downstream",
        }
    )
    assert named_tables(weekly.query) == {DAILY, SOURCE}
    assert weekly.upstream_candidates({DAILY, "lake.agg.daily"}) == {DAILY}
    # the store's view (no registry at hand): every table the query names fully is an upstream candidate
    assert weekly.table_spec().action_settings("refresh").upstream == sorted([DAILY, SOURCE])
    assert weekly.table_spec({DAILY}).action_settings("refresh").upstream == [DAILY]


def test_the_refresh_dag_and_the_asset_a_downstream_waits_for() -> None:
    from airflow_tablemgmt.assets.uri import sanitize_uri
    from airflow_tablemgmt.dag_factory.assets import refresh_asset
    from airflow_tablemgmt.dag_factory.build import build_dags
    from airflow_tablemgmt.factories.discovery import load_factories

    daily = parse_dynamic_table(_spec()).table_spec()
    weekly = DynamicTableSpec.model_validate(
        {"identifier": "lake.agg.eu.weekly", "query": f"SELECT * FROM {DAILY}", "freshness": "downstream"}
    ).table_spec({DAILY})
    result = build_dags([daily, weekly], load_factories())
    assert result.errors == []
    dag = result.dags[f"tms__{DAILY}__refresh"]
    [outlet] = dag.tasks[0].outlets
    assert outlet == refresh_asset(DAILY)
    assert outlet.uri == "tablemgmt://lake/agg.eu/daily/refresh"
    from urllib.parse import urlsplit

    assert sanitize_uri(urlsplit(outlet.uri)).geturl() == outlet.uri  # Airflow's normalizer takes it
    waits_for = result.dags["tms__lake.agg.eu.weekly__refresh"].timetable.asset_condition
    assert waits_for == outlet
    # a three-part table's asset is unchanged
    assert refresh_asset("lake.db.daily").uri == "tablemgmt://lake/db/daily/refresh"
