"""What is at a table's location, read without a JVM: is it a table of its declared format?

A path-based table (Delta, Hudi, and Iceberg in a ``hadoop`` catalog) lives at ``<warehouse>/<namespace>/
<name>``. Each format marks its root: Delta ``_delta_log/``, Hudi ``.hoodie/``, Iceberg (hadoop)
``metadata/`` with ``version-hint.text`` or ``v<N>.metadata.json``, Paimon ``snapshot/`` and ``schema/``.
:func:`check_location` tells three answers apart, because they call for different things:

- **a table of the format**: nothing to say;
- **not a table of the format** (the location is readable and holds something else, or is missing while
  its warehouse is readable): a declaration is refused and a run declined before any Spark job, naming
  what was found;
- **not readable here** (the warehouse is not mounted on this machine, an object store without its
  settings or with unresolved secrets, a scheme read only by the JVM): a declaration is accepted with a
  warning, and the run goes to the job, which reads the table where it runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.metadata.errors import HealthUnavailable, PathNotFound
from airflow_tablemgmt.metadata.table_dir import open_table_dir
from airflow_tablemgmt.metadata.table_paths import local_path, table_location

#: The formats whose tables are found by path, and for Iceberg only in a hadoop catalog.
PATH_FORMATS = ("delta", "hudi")
_FORMAT_NAMES = {"delta": "Delta", "hudi": "Hudi", "iceberg": "Iceberg", "paimon": "Paimon"}
_ICEBERG_METADATA = re.compile(r"^(version-hint\.text|v\d+(\.gz)?\.metadata\.json)$")
_SHOWN = 5
_PATH_FORMAT_NAMES = frozenset(_FORMAT_NAMES.get(f, f) for f in PATH_FORMATS)


@dataclass(frozen=True)
class LocationCheck:
    """The answer: ``problem`` (not a table of the format: refuse / decline), ``warning`` (not readable
    here: accept, the job decides), or neither (a table of the format, or a table not found by path)."""

    location: str | None = None
    problem: str | None = None
    warning: str | None = None
    #: The problem is that nothing is there (its warehouse readable).
    missing: bool = False
    #: Nothing is there yet, and a table of this format is made by its writer at that location (an
    #: Iceberg table of a hadoop catalog): a declaration only warns of it, the runs are declined until then.
    may_appear_later: bool = False


def checked_by_path(catalog: CatalogSpec, format: str) -> bool:
    """Whether a table of ``format`` in ``catalog`` is found by its path (so :func:`check_location` applies)."""
    fmt = str(format)
    return fmt in PATH_FORMATS or (fmt == "iceberg" and catalog.type == CatalogType.HADOOP)


def found_format(names: Mapping[str, bool], metadata_names: list[str] | None) -> str | None:
    """The format whose marker ``names`` (entry -> is a directory) hold; ``metadata_names``: the listing
    of ``metadata/`` when there is one (an Iceberg table needs a version file there)."""
    if names.get("_delta_log"):
        return "delta"
    if names.get(".hoodie"):
        return "hudi"
    if names.get("snapshot") and names.get("schema"):
        return "paimon"
    if names.get("metadata") and metadata_names and any(_ICEBERG_METADATA.match(n) for n in metadata_names):
        return "iceberg"
    return None


def check_location(
    catalog: CatalogSpec,
    table: TableIdentifier,
    format: str,
    properties: Mapping[str, str] | None = None,
    *,
    local_only: bool = False,
) -> LocationCheck:
    """What is at ``table``'s location, for a table declared as ``format`` (see the module docstring).
    ``properties``: the catalog's with secret references resolved (an object store's settings); the
    catalog's own are used when not given. ``local_only``: leave a location on an object store unchecked
    (the DAG file's parse makes no network calls)."""
    if not checked_by_path(catalog, format):
        return LocationCheck()
    fmt = str(format)
    want = _FORMAT_NAMES.get(fmt, fmt)
    props = catalog.properties if properties is None else properties
    try:
        location = table_location(catalog, table)
    except HealthUnavailable as e:
        return LocationCheck(None, problem=str(e))
    if local_only and local_path(location) is None:
        return LocationCheck(location)
    try:
        root = open_table_dir(location, props, kind=f"{want} table")
        entries = {e.name: e.is_dir for e in root.list("")}
    except PathNotFound:
        return _missing(catalog, location, want, props)
    except HealthUnavailable as e:
        return LocationCheck(
            location, warning=f"{location}: not readable here ({e}); the job reads it where it runs"
        )
    metadata_names = None
    if entries.get("metadata"):
        try:
            metadata_names = [e.name for e in root.list("metadata")]
        except HealthUnavailable:
            metadata_names = None
    found = found_format(entries, metadata_names)
    if found == fmt:
        return LocationCheck(location)
    if found is not None:
        name = _FORMAT_NAMES.get(found, found)
        what = f"{'an' if name[0] in 'AEIOU' else 'a'} {name} table"
    elif not entries:
        what = "an empty directory"
    else:
        shown = ", ".join(sorted(entries)[:_SHOWN]) + (", …" if len(entries) > _SHOWN else "")
        what = f"a directory of {len(entries)} entries with no table metadata ({shown})"
    return LocationCheck(
        location,
        problem=(
            f"{location} is {what}, not a {want} table (a {want} table has {_marker(fmt)}); declare the "
            f"table's format as it is, or the location of a {want} table"
        ),
    )


def _missing(catalog: CatalogSpec, location: str, want: str, props: Mapping[str, str]) -> LocationCheck:
    """The table's directory is not there: not a table when its warehouse is readable, else not readable here."""
    assert catalog.warehouse is not None  # table_location needed it
    try:
        open_table_dir(catalog.warehouse, props, kind="warehouse").list("")
    except HealthUnavailable as e:
        return LocationCheck(
            location,
            warning=f"{location}: not readable here (its warehouse: {e}); the job reads it where it runs",
        )
    return LocationCheck(
        location,
        problem=f"{location} does not exist (its warehouse is readable): no {want} table there",
        missing=True,
        may_appear_later=want not in _PATH_FORMAT_NAMES,
    )


def _marker(fmt: str) -> str:
    return {
        "delta": "_delta_log/",
        "hudi": ".hoodie/",
        "iceberg": "metadata/ with version-hint.text or v<N>.metadata.json",
        "paimon": "snapshot/ and schema/",
    }.get(fmt, "its format's metadata")
