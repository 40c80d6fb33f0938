"""Catalogs as triggers carry them (JSON, secrets only as references) and the snapshot readers built
from them: one per catalog per process, its references resolved in the triggerer's worker thread."""

from __future__ import annotations

import json
import threading
from typing import Any

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.secrets import check_secret_properties
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader


def catalog_json(catalog: dict[str, Any] | CatalogSpec) -> dict[str, Any]:
    """Validate a catalog and return its JSON form (what triggers serialize).

    Secrets must still be references: a ``CatalogSpec`` whose references were already resolved
    (``resolve_catalog_spec``) is refused, so a resolved value never reaches Airflow's trigger table.
    """
    if isinstance(catalog, CatalogSpec):
        hit = _catalog_forms.get(id(catalog))
        if hit is not None and hit[0] is catalog:
            return _copy_form(hit[1])
    spec = catalog if isinstance(catalog, CatalogSpec) else CatalogSpec.model_validate(catalog)
    try:
        check_secret_properties(spec.properties, "catalog.properties")
    except ValueError as e:
        raise InvalidDeclaration(str(e)) from None
    form = spec.model_dump(mode="json", by_alias=True)
    if spec is catalog:
        if len(_catalog_forms) >= _CATALOG_FORMS_MAX:
            _catalog_forms.clear()
        _catalog_forms[id(spec)] = (spec, form)
        return _copy_form(form)
    return form


# A CatalogSpec (frozen) -> its checked JSON form: a full parse builds one watcher per table over a
# handful of catalog objects, so each is checked and dumped once, not once per table. Keyed by
# identity, holding the spec so that its id stays its own; bounded for long-lived processes.
_catalog_forms: dict[int, tuple[CatalogSpec, dict[str, Any]]] = {}
_CATALOG_FORMS_MAX = 256


def _copy_form(form: dict[str, Any]) -> dict[str, Any]:
    """Each trigger gets its own dicts (its kwargs are the trigger's own to keep)."""
    return {k: dict(v) if isinstance(v, dict) else v for k, v in form.items()}


def resolved_reader(catalog: dict[str, Any]) -> SnapshotReader:
    """A reader over ``catalog`` with its secret references resolved in this process (blocking I/O:
    a connection or variable lookup; call it in a worker thread from a trigger). The reader of the
    format the catalog is marked with (``format_readers.reader_for``), Iceberg's by default."""
    from airflow_tablemgmt.triggers.format_readers import reader_for

    return reader_for(resolve_catalog_spec(CatalogSpec.model_validate(catalog)))  # type: ignore[return-value]


_shared_readers: dict[str, SnapshotReader] = {}
_shared_readers_lock = threading.Lock()


def shared_reader(catalog: dict[str, Any]) -> SnapshotReader:
    """One reader per catalog (as declared, references unresolved) for all watchers in this process.

    A triggerer carrying thousands of tables then resolves a catalog's secrets, opens its pyiceberg
    catalog or FileIO and keeps its pointer cache once, not once per table: each secret lookup is a
    round trip through the triggerer's supervisor, and a REST catalog would otherwise see one client
    (and one token) per table. The reader is thread-safe. A failed resolution is not cached.
    """
    key = json.dumps(catalog, sort_keys=True)
    with _shared_readers_lock:
        reader = _shared_readers.get(key)
        if reader is None:
            reader = _shared_readers[key] = resolved_reader(catalog)
        return reader


def check_table_in_catalog(table_id: str, catalog: dict[str, Any]) -> TableIdentifier:
    """Parse ``catalog.namespace.table`` and check that it belongs to ``catalog``."""
    table = TableIdentifier.parse(table_id)
    if table.catalog != catalog["name"]:
        raise InvalidDeclaration(
            f"table: {table_id} is in catalog {table.catalog!r}, but catalog.name is {catalog['name']!r}"
        )
    return table
