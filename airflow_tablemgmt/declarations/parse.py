"""One declarations document -> validated specs. Each entry is validated on its own, so one bad entry
is reported by name while the others load; nothing here raises. YAML is loaded with libyaml's
``CSafeLoader`` when PyYAML has it. An entry's digest (:func:`entry_digest`) lets a later parse
reuse its validated form."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from airflow_tablemgmt.core.actions import PLAIN_TABLE
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import WRITING as WRITING_CATALOG  # noqa: N811
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec, format_validation_error, short_repr
from airflow_tablemgmt.declarations.errors import DeclarationError, file_error, short_message
from airflow_tablemgmt.declarations.model import LoadedDeclarations, ParsedDocument, ReuseValidated
from airflow_tablemgmt.declarations.policies import parse_policies

# libyaml's parser when PyYAML was built with it: ~5x faster on a large file, same safe constructor
# (so the same Python objects, and the same errors for bad values).
_YAML_LOADER: type[Any] = (
    getattr(yaml, "CSafeLoader", yaml.SafeLoader) if yaml.__with_libyaml__ else yaml.SafeLoader
)


def _name_of(raw: Any) -> str:
    if isinstance(raw, dict):
        if "identifier" in raw and not any(k in raw for k in ("catalog", "namespace", "name")):
            return str(raw["identifier"])  # a dynamic table may be declared by identifier
        return f"{raw.get('catalog')}.{raw.get('namespace')}.{raw.get('name')}"
    return short_repr(raw)


def parse_declarations_text(
    text: str,
    source: str,
    *,
    known_catalogs: Collection[str] = (),
    reuse: ReuseValidated | None = None,
) -> LoadedDeclarations:
    """Validate a declarations document. Never raises: every problem is a :class:`DeclarationError`
    of its entry (the others still load) or of the file.

    ``known_catalogs``: catalogs declared elsewhere (other files of the set) that its tables may
    name. ``reuse(table_name, entry_digest)`` may return the validated spec of an entry whose
    digest it has on record (see :func:`entry_digest`); anything else is validated here.
    """
    return finish_parse(begin_parse(text, source), known_catalogs=known_catalogs, reuse=reuse)


def begin_parse(text: str, source: str) -> ParsedDocument:
    """YAML load and catalogs. Never raises."""
    doc = ParsedDocument(
        LoadedDeclarations(source=source, digest=hashlib.sha256(text.encode("utf-8", "replace")).hexdigest())
    )
    try:
        doc.raw_tables, doc.raw_dynamic = _parse_into(doc.out, text)
    except Exception as e:  # noqa: BLE001 - a last line of defence: the DAG file must keep its other DAGs
        doc.out.errors.append(file_error(source, f"cannot be read: {type(e).__name__}: {short_message(e)}"))
    return doc


def finish_parse(
    doc: ParsedDocument, *, known_catalogs: Collection[str] = (), reuse: ReuseValidated | None = None
) -> LoadedDeclarations:
    """Validate the document's tables. Never raises."""
    if doc.raw_tables is not None:
        try:
            _parse_tables(doc.out, doc.raw_tables, set(known_catalogs), reuse)
        except Exception as e:  # noqa: BLE001 - as in begin_parse
            doc.out.errors.append(
                file_error(doc.out.source, f"cannot be read: {type(e).__name__}: {short_message(e)}")
            )
        doc.raw_tables = None
    if doc.raw_dynamic is not None:
        try:
            _parse_dynamic(doc.out, doc.raw_dynamic, set(known_catalogs))
        except Exception as e:  # noqa: BLE001 - as in begin_parse
            doc.out.errors.append(
                file_error(doc.out.source, f"cannot be read: {type(e).__name__}: {short_message(e)}")
            )
        doc.raw_dynamic = None
    return doc.out


def entry_digest(raw: Any) -> str:
    """SHA-256 of one parsed entry in an exact, type-tagged encoding.

    Two entries get the same digest only if validation receives the same input: same keys in the
    same order, same values of the same types (``1``, ``1.0``, ``true`` and ``"1"`` all differ).
    It hashes what YAML produced, not the bytes, so an entry that takes a value through an alias
    (``<<: *defaults``) changes digest when the anchor does.
    """
    return hashlib.sha256(_canonical(raw).encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(v: Any) -> str:
    if isinstance(v, str):
        return "s" + json.dumps(v)
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, int):
        return "i" + hex(v)  # hex: no digit limit, unlike str() of a 5,000-digit int
    if v is None:
        return "n"
    if isinstance(v, float):
        return "f" + repr(v)
    if isinstance(v, dict):
        return "{" + ",".join(_canonical(k) + ":" + _canonical(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_canonical(x) for x in v) + "]"
    return "o" + json.dumps(f"{type(v).__module__}.{type(v).__qualname__}:{v!r}")


@functools.cache
def validation_fingerprint() -> str:
    """Changes whenever the code that validates a declaration may have: the source of ``core``
    (the models and their rules), of the built-in formats, of this package, and the installed format plugins'
    versions. The registered action names are not listed: the generic ones are ``core``'s and the built-in
    formats' are their sources, both hashed (listing them loaded every built-in format at each task start of
    a table declared in a file, whose file record is checked against this)."""
    from airflow_tablemgmt import core

    h = hashlib.sha256()
    formats = Path(__file__).parent.parent / "formats"  # the built-in formats' descriptors and actions
    sources = [
        Path(core.__file__).parent.rglob("*.py"),
        formats.rglob("*.py"),
        Path(__file__).parent.glob("*.py"),
    ]
    for path in [p for found in sources for p in sorted(found)]:
        h.update(str(path.relative_to(path.parent.parent)).encode())
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"?")
    # Format plugins validate their own actions: each installed one's distribution and version.
    from importlib.metadata import entry_points

    from airflow_tablemgmt.core.formats import ENTRY_POINT_GROUP

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.dist is not None and ep.dist.name != "airflow-tablemgmt":
            h.update(f"{ep.name}={ep.dist.name}=={ep.dist.version}".encode())
    return h.hexdigest()


def _parse_into(out: LoadedDeclarations, text: str) -> tuple[list[Any] | None, list[Any] | None]:
    """``(tables:, dynamic-tables:)`` entries of the document, each None when not a list."""
    source = out.source
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader (C or Python)
    except Exception as e:  # noqa: BLE001 - YAMLError, but also ValueError for a 5,000-digit int
        out.errors.append(file_error(source, f"not valid YAML: {short_message(e)}"))
        return None, None
    if data is None:
        return None, None  # an empty file (or only comments): declares nothing
    if not isinstance(data, dict):
        out.errors.append(
            file_error(source, f"expected a mapping with 'catalogs' and 'tables', got {type(data).__name__}")
        )
        return None, None
    unknown = [k for k in data if k not in ("version", "catalogs", "tables", "dynamic-tables", "policies")]
    if unknown:
        shown = sorted(short_repr(k) if not isinstance(k, str) else k for k in unknown)
        out.errors.append(
            file_error(
                source,
                f"unknown top-level keys {shown}; allowed: version, catalogs, tables, dynamic-tables, policies",
            )
        )
    if data.get("version", 1) != 1 or isinstance(data.get("version"), bool):
        out.errors.append(file_error(source, f"version: must be 1, got {short_repr(data.get('version'))}"))
    _parse_catalogs(out, data.get("catalogs"))
    parse_policies(out, data.get("policies"))
    raw_dynamic = data.get("dynamic-tables")
    if raw_dynamic is not None and not isinstance(raw_dynamic, list):
        out.errors.append(
            file_error(
                source, f"dynamic-tables: expected a list of dynamic tables, got {type(raw_dynamic).__name__}"
            )
        )
        raw_dynamic = None
    if raw_dynamic is not None:
        out.declares_tables = True
    raw_tables = data.get("tables")
    if raw_tables is None:
        return None, raw_dynamic  # no `tables:` (or `tables:` with nothing under it): declares no tables
    if not isinstance(raw_tables, list):
        out.errors.append(
            file_error(source, f"tables: expected a list of tables, got {type(raw_tables).__name__}")
        )
        return None, raw_dynamic
    out.declares_tables = True
    return raw_tables, raw_dynamic


def _parse_catalogs(out: LoadedDeclarations, raw_catalogs: Any) -> None:
    source = out.source
    entries: list[tuple[str, Any]]
    if raw_catalogs is None:
        return
    if isinstance(raw_catalogs, dict):  # mapping form: {name: {type, warehouse}}
        entries = []
        for name, body in raw_catalogs.items():
            path = f"catalogs.{name}"
            if body is None:
                body = {}
            entries.append((path, {"name": name, **body} if isinstance(body, dict) else body))
    elif isinstance(raw_catalogs, list):
        entries = [(f"catalogs[{i}]", raw) for i, raw in enumerate(raw_catalogs)]
    else:
        out.errors.append(
            file_error(source, f"catalogs: expected a list of catalogs, got {type(raw_catalogs).__name__}")
        )
        return
    by_location: dict[tuple[str, ...], str] = {}
    for path, raw in entries:
        label = f"catalog {raw.get('name')}" if isinstance(raw, dict) else f"catalog {path}"
        try:
            spec = CatalogSpec.model_validate(raw, context=WRITING_CATALOG)
        except ValidationError as e:
            out.errors.append(
                DeclarationError(source, label, format_validation_error(e, source, path_prefix=path))
            )
            continue
        except Exception as e:  # noqa: BLE001 - one bad entry is that entry's error
            out.errors.append(
                DeclarationError(source, label, f"{source}: {path}: {type(e).__name__}: {short_message(e)}")
            )
            continue
        if any(c.name == spec.name for c in out.catalogs):
            out.errors.append(DeclarationError(source, label, f"{source}: {path} ({label}): declared twice"))
            continue
        key = spec.location_key()
        if key in by_location:
            out.errors.append(
                DeclarationError(
                    source,
                    label,
                    f"{source}: {path} ({label}): reaches the same tables as catalog {by_location[key]} "
                    f"({spec.type.value}, {spec.warehouse or spec.properties.get('uri')}); one physical table "
                    f"would have two names and two leases; use catalog {by_location[key]}",
                )
            )
            continue
        by_location[key] = spec.name
        out.catalogs.append(spec)


def _parse_tables(
    out: LoadedDeclarations, raw_tables: list[Any], known_catalogs: set[str], reuse: ReuseValidated | None
) -> None:
    source = out.source
    catalog_names = {c.name for c in out.catalogs} | known_catalogs
    broken_catalogs = {e.table.removeprefix("catalog ") for e in out.errors if e.table.startswith("catalog ")}
    seen: set[str] = set()
    for i, raw in enumerate(raw_tables):
        name = _name_of(raw)
        digest = entry_digest(raw)
        try:
            reused = reuse(name, digest) if reuse is not None else None
            spec = reused if reused is not None else TableSpec.model_validate(raw, context=PLAIN_TABLE)
        except ValidationError as e:
            msg = format_validation_error(e, source, path_prefix=f"tables[{i}]", label=f"table {name}")
            out.errors.append(DeclarationError(source, name, msg))
            continue
        except Exception as e:  # noqa: BLE001 - one bad entry is that entry's error
            msg = f"{source}: tables[{i}] (table {name}): {type(e).__name__}: {short_message(e)}"
            out.errors.append(DeclarationError(source, name, msg))
            continue
        problem = _placement_problem(
            f"{source}: tables[{i}]",
            f"table {name}",
            spec.catalog,
            spec.id,
            catalog_names,
            broken_catalogs,
            seen,
        )
        if problem is not None:
            out.errors.append(DeclarationError(source, name, problem))
            continue
        seen.add(spec.id)
        out.tables.append(spec)
        out.entry_digests[spec.id] = digest
        out.reused += reused is not None


def _parse_dynamic(out: LoadedDeclarations, raw_entries: list[Any], known_catalogs: set[str]) -> None:
    """Validate each ``dynamic-tables:`` entry on its own (as ``_parse_tables`` does for tables).

    Whether a ``freshness: downstream`` table has an upstream dynamic table, and whether dynamic
    tables read each other in a cycle, depends on the whole set (other files, the store): see
    :func:`check_dynamic_tables`.
    """
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec  # here: a table's task start parses none

    source = out.source
    catalog_names = {c.name for c in out.catalogs} | known_catalogs
    broken_catalogs = {e.table.removeprefix("catalog ") for e in out.errors if e.table.startswith("catalog ")}
    seen = {t.id for t in out.tables}
    for i, raw in enumerate(raw_entries):
        name = _name_of(raw)
        out.dynamic_names.add(name)
        where = f"{source}: dynamic-tables[{i}]"
        try:
            spec = DynamicTableSpec.model_validate(raw)
            view = spec.table_spec()
        except ValidationError as e:
            msg = format_validation_error(
                e, source, path_prefix=f"dynamic-tables[{i}]", label=f"dynamic table {name}"
            )
            out.errors.append(DeclarationError(source, name, msg))
            continue
        except InvalidDeclaration as e:
            text = str(e).removeprefix(f"dynamic table {name}: ")
            out.errors.append(DeclarationError(source, name, f"{where} (dynamic table {name}): {text}"))
            continue
        except Exception as e:  # noqa: BLE001 - one bad entry is that entry's error
            msg = f"{where} (dynamic table {name}): {type(e).__name__}: {short_message(e)}"
            out.errors.append(DeclarationError(source, name, msg))
            continue
        problem = _placement_problem(
            where, f"dynamic table {name}", spec.catalog, spec.id, catalog_names, broken_catalogs, seen
        )
        if problem is not None:
            out.errors.append(DeclarationError(source, name, problem))
            continue
        seen.add(spec.id)
        out.tables.append(view)
        out.dynamic_tables.append(spec)
        out.entry_digests[spec.id] = entry_digest(raw)


def _placement_problem(
    where: str,
    what: str,
    catalog: str,
    table_id: str,
    catalog_names: Collection[str],
    broken_catalogs: Collection[str],
    seen: Collection[str],
) -> str | None:
    """Why an entry that validated on its own cannot be placed: its catalog is not declared, or
    its table was declared before (``where``: ``"<file>: tables[3]"``; ``what``: ``"table a.b.c"``)."""
    if catalog not in catalog_names:
        return (
            f"{where}.catalog ({what}): {catalog!r} is not declared"
            f"{' (its declaration has errors)' if catalog in broken_catalogs else ''}; "
            f"declared catalogs: {', '.join(sorted(catalog_names)) or 'none'}"
        )
    if table_id in seen:
        return f"{where} ({what}): declared twice"
    return None
