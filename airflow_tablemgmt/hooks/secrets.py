"""Resolve a catalog's secret references (``conn:``, ``var:``, ``env:``) on the worker or triggerer.

The store, ``tables.yaml``, trigger kwargs and the DAG's serialized form hold only references (see
:mod:`airflow_tablemgmt.core.secrets`). The plaintext exists only in the process that needs it: the
worker, just before it writes the job's spec file (0600) for spark-submit, and the triggerer, when it
builds the pyiceberg reader. Every resolved value is registered with Airflow's secrets masker, so a
task or triggerer log that happens to print it shows ``***``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airflow_tablemgmt.core.secrets import SecretReference, parse_reference
from airflow_tablemgmt.core.tables import CONNECTION_PROPERTY, CatalogSpec
from airflow_tablemgmt.hooks.errors import SecretResolutionError

_CONN_FIELDS = ("login", "password", "host", "schema", "port")


def _describe(ref: SecretReference) -> str:
    if ref.kind == "conn":
        return f"conn:{ref.name}" + ("" if ref.field == "password" else f".{ref.field}")
    return f"{ref.kind}:{ref.name}"


def resolve_reference(ref: SecretReference, where: str) -> str:
    """The value ``ref`` points at. ``where`` names the property, for the error message."""
    shown = _describe(ref)
    if ref.kind == "env":
        value = os.environ.get(ref.name)
        if value is None:
            raise SecretResolutionError(
                f"{where}: reference {shown!r} does not resolve: environment variable {ref.name} is not set "
                "on this worker"
            )
        return value
    if ref.kind == "var":
        from airflow.sdk import Variable

        try:
            return str(Variable.get(ref.name))
        except Exception as e:  # noqa: BLE001 - NotFound differs between task and triggerer contexts
            raise SecretResolutionError(
                f"{where}: reference {shown!r} does not resolve: Airflow variable {ref.name!r} is not "
                f"available ({type(e).__name__})"
            ) from None
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(ref.name)
    except Exception as e:  # noqa: BLE001
        raise SecretResolutionError(
            f"{where}: reference {shown!r} does not resolve: Airflow connection {ref.name!r} is not "
            f"available ({type(e).__name__})"
        ) from None
    if ref.field.startswith("extra."):
        key = ref.field.removeprefix("extra.")
        value = (conn.extra_dejson or {}).get(key)
        missing = f"connection {ref.name!r} has no extra field {key!r}"
    else:
        if ref.field not in _CONN_FIELDS:  # parse_reference already restricts it; be explicit anyway
            raise SecretResolutionError(
                f"{where}: reference {shown!r}: field {ref.field!r} is not one of "
                f"{', '.join(_CONN_FIELDS)}, extra.<key>"
            )
        value = getattr(conn, ref.field, None)
        missing = f"connection {ref.name!r} has no {ref.field}"
    if value is None or value == "":
        raise SecretResolutionError(f"{where}: reference {shown!r} does not resolve: {missing}")
    return str(value)


def _mask(value: str) -> None:
    from airflow.sdk.log import mask_secret

    # No ``name``: Airflow would then mask only keys on its own sensitive list, and ``header.*`` or
    # ``s3.secret-access-key`` are not on it. Values shorter than 5 characters are skipped (and logged).
    mask_secret(value)


def resolve_properties(properties: Mapping[str, Any], field: str = "catalog.properties") -> dict[str, str]:
    """A copy of ``properties`` with every reference replaced by its value (each value masked in logs).

    Any property may be a reference (a ``uri`` kept in a connection works too); a value that is not a
    reference is passed through unchanged.
    """
    out: dict[str, str] = {}
    for key, value in properties.items():
        ref = parse_reference(value)
        if ref is None:
            out[key] = str(value)
            continue
        resolved = resolve_reference(ref, f"{field}.{key}")
        _mask(resolved)
        out[key] = resolved
    return out


def connection_properties(properties: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``properties`` with the settings of the Airflow connection named by ``airflow-connection`` filled
    in (the official apache-iceberg provider's ``iceberg`` connection): ``uri`` from its host,
    ``credential`` (OAuth2 ``client_id:client_secret``) from its login and password, and every key of
    its extra. A property the catalog declares itself wins over the connection's. The connection's
    password is masked in logs. Without ``airflow-connection``, ``properties`` unchanged (a copy)."""
    out = dict(properties)
    conn_id = out.pop(CONNECTION_PROPERTY, None)
    if conn_id is None:
        return out
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(str(conn_id))
    except Exception as e:  # noqa: BLE001 - Airflow raises its own not-found types per version
        raise SecretResolutionError(
            f"{where}.{CONNECTION_PROPERTY}: connection {conn_id!r} does not resolve ({type(e).__name__}); "
            "create it (conn type iceberg: host = the catalog URI, login/password = the OAuth2 client "
            "id and secret, extra = catalog properties)"
        ) from None
    supplied: dict[str, Any] = {}
    host = (conn.host or "").strip()
    if host:
        if "://" not in host:  # a connection URI's host has no scheme: rebuild the base URL
            host = f"https://{host}" + (f":{conn.port}" if conn.port else "")
        supplied["uri"] = host.rstrip("/")
    if conn.login and conn.password:
        _mask(str(conn.password))
        supplied["credential"] = f"{conn.login}:{conn.password}"
    for key, value in (conn.extra_dejson or {}).items():
        if isinstance(value, str | int | float | bool):
            supplied[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return {**supplied, **out}


def resolve_catalog(catalog_json: Mapping[str, Any]) -> dict[str, Any]:
    """The catalog's JSON form (``CatalogSpec.model_dump(mode="json")``) with its properties resolved.

    The result holds plaintext secrets: hand it only to the job's spec file or to a reader, never
    to a log, XCom, trigger kwargs or the store.
    """
    name = catalog_json.get("name", "?")
    where = f"catalog {name}: properties"
    properties = connection_properties(catalog_json.get("properties") or {}, where)
    return {**catalog_json, "properties": resolve_properties(properties, where)}


def resolve_catalog_spec(catalog: CatalogSpec) -> CatalogSpec:
    """``catalog`` with its references resolved, for a reader in this process.

    ``model_copy`` does not re-validate: the spec was validated with references, and a resolved secret
    would (rightly) be refused as a plaintext value by ``CatalogSpec``'s own checks.
    """
    if CONNECTION_PROPERTY not in catalog.properties and not any(
        parse_reference(v) is not None for v in catalog.properties.values()
    ):
        return catalog
    where = f"catalog {catalog.name}: properties"
    resolved = resolve_properties(connection_properties(catalog.properties, where), where)
    return catalog.model_copy(update={"properties": resolved})
