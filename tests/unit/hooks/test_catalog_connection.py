"""A catalog's settings from an Airflow ``iceberg`` connection (the official apache-iceberg provider's type:
host = URI, login:password = OAuth2 client credential, extra = properties), resolved where secrets are
resolved; and a custom ``catalog-impl`` refused with what to do instead."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import CatalogSpec, parse_catalog
from airflow_tablemgmt.hooks.errors import SecretResolutionError
from airflow_tablemgmt.hooks.secrets import resolve_catalog, resolve_catalog_spec

CONN = {
    "conn_type": "iceberg",
    "host": "https://catalog.example.com/api/catalog",
    "login": "client-id",
    "password": "client-secret-value",
    "extra": {
        "warehouse": "analytics",
        "s3.region": "eu-west-1",
        "header.X-Iceberg-Access-Delegation": "vended-credentials",
    },
}


@pytest.fixture
def iceberg_connection(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AIRFLOW_CONN_TMS_ICEBERG", json.dumps(CONN))
    yield "tms_iceberg"


def _catalog(**props: str) -> CatalogSpec:
    return CatalogSpec(name="lake", type="rest", properties={"airflow-connection": "tms_iceberg", **props})


def test_a_rest_catalog_needs_no_uri_when_a_connection_supplies_it() -> None:
    assert _catalog().properties == {"airflow-connection": "tms_iceberg"}
    with pytest.raises(
        ValueError, match=r"properties\.uri: a rest catalog needs its 'uri'.*airflow-connection"
    ):
        CatalogSpec(name="lake", type="rest", properties={})


def test_the_connection_supplies_uri_credential_and_properties(iceberg_connection: str) -> None:
    resolved = resolve_catalog_spec(_catalog())
    assert resolved.properties == {
        "uri": "https://catalog.example.com/api/catalog",
        "credential": "client-id:client-secret-value",
        "warehouse": "analytics",
        "s3.region": "eu-west-1",
        "header.X-Iceberg-Access-Delegation": "vended-credentials",
    }
    # The JSON form the Spark job's spec file gets resolves the same way.
    assert resolve_catalog(_catalog().model_dump(mode="json"))["properties"] == resolved.properties


def test_declared_properties_win_over_the_connection(iceberg_connection: str) -> None:
    resolved = resolve_catalog_spec(_catalog(uri="https://other.example.com", warehouse="finance"))
    assert resolved.properties["uri"] == "https://other.example.com"
    assert resolved.properties["warehouse"] == "finance"
    assert resolved.properties["credential"] == "client-id:client-secret-value"


def test_a_missing_connection_names_the_property_and_what_to_create(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_TMS_ICEBERG", raising=False)
    with pytest.raises(SecretResolutionError) as e:
        resolve_catalog_spec(_catalog())
    message = str(e.value)
    assert "catalog lake: properties.airflow-connection" in message and "'tms_iceberg'" in message
    assert "conn type iceberg" in message


def test_the_connection_id_itself_is_checked_and_the_stored_form_keeps_only_the_id() -> None:
    with pytest.raises(
        ValueError, match=r"properties\.airflow-connection: 'conn:x y' is not an Airflow connection id"
    ):
        _catalog(**{"airflow-connection": "conn:x y"})
    dumped = _catalog().model_dump(mode="json")
    assert dumped["properties"] == {"airflow-connection": "tms_iceberg"}  # no uri, no secret stored


def test_two_catalogs_on_two_connections_are_two_locations() -> None:
    a = _catalog()
    b = CatalogSpec(name="other", type="rest", properties={"airflow-connection": "tms_iceberg_2"})
    assert a.location_key() != b.location_key()


def test_a_custom_catalog_impl_is_refused_saying_what_to_do() -> None:
    with pytest.raises((ValueError, InvalidDeclaration)) as e:
        parse_catalog(
            {
                "name": "c",
                "type": "rest",
                "properties": {"uri": "http://h", "catalog-impl": "com.x.MyCatalog"},
            }
        )
    assert "properties.catalog-impl" in str(e.value) and "declare type rest" in str(e.value)
