"""What is at a table's location, read without a JVM: is it a table of its declared format?

A path-based table (of a path-based format, or of the catalogs' own format in a ``hadoop`` catalog) lives at ``<warehouse>/<namespace>/
<name>``. Each format's descriptor says how it marks its root (``Format.root``: e.g. a log directory, a
metadata directory with a version file). :func:`check_location` tells three answers apart, because they call
for different things:

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from airflow_tablemgmt.core.formats import DEFAULT_FORMAT, FORMATS
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.metadata.errors import HealthUnavailable, PathNotFound
from airflow_tablemgmt.metadata.table_dir import open_table_dir
from airflow_tablemgmt.metadata.table_paths import local_path, table_location

_SHOWN = 5


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
    """Whether a table of ``format`` in ``catalog`` is found by its path (so :func:`check_location` applies):
    a path-based format's, and the catalogs' own format's in a ``hadoop`` catalog."""
    fmt = FORMATS.find(format)
    if fmt is None or not fmt.root:
        return False
    return fmt.path_based or (fmt.name == DEFAULT_FORMAT and catalog.type == CatalogType.HADOOP)


def found_format(names: Mapping[str, bool], listing: Callable[[str], list[str] | None]) -> str | None:
    """The installed format whose root markers ``names`` (entry -> is a directory) hold; ``listing(dir)``
    lists one of them (None when it cannot be read) for a format whose marker is a file inside it."""
    for fmt in FORMATS.all():
        if not fmt.root or not all(names.get(d) for d in fmt.root):
            continue
        if fmt.root_files is None:
            return fmt.name
        pattern = re.compile(fmt.root_files)
        inside = listing(fmt.root[0])
        if inside and any(pattern.match(n) for n in inside):
            return fmt.name
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
    declared = FORMATS.get(fmt)
    want = declared.display
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
        return _missing(catalog, location, want, props, may_appear_later=not declared.path_based)
    except HealthUnavailable as e:
        return LocationCheck(
            location, warning=f"{location}: not readable here ({e}); the job reads it where it runs"
        )

    def listing(directory: str) -> list[str] | None:
        try:
            return [e.name for e in root.list(directory)]
        except HealthUnavailable:
            return None

    found = found_format(entries, listing)
    marker = declared.marker or "its format's metadata"
    if found == fmt:
        return LocationCheck(location)
    if found is not None:
        name = FORMATS.get(found).display
        what = f"{'an' if name[0] in 'AEIOU' else 'a'} {name} table"
    elif not entries:
        what = "an empty directory"
    else:
        shown = ", ".join(sorted(entries)[:_SHOWN]) + (", …" if len(entries) > _SHOWN else "")
        what = f"a directory of {len(entries)} entries with no table metadata ({shown})"
    return LocationCheck(
        location,
        problem=(
            f"{location} is {what}, not a {want} table (a {want} table has {marker}); declare the "
            f"table's format as it is, or the location of a {want} table"
        ),
    )


def _missing(
    catalog: CatalogSpec, location: str, want: str, props: Mapping[str, str], *, may_appear_later: bool
) -> LocationCheck:
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
        may_appear_later=may_appear_later,
    )
