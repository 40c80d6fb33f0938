"""Table declarations kept as code: ``dags/tables.yaml`` -> validated specs -> the store.

Each table is validated on its own, so one bad entry is reported by name (file, table, field path,
value, what is allowed) while the others still load; reading never raises. Tables declared here are
owned by code: REST and the CLI refuse to change them.

Declarations may be split: ``tables.yaml`` plus ``tables.d/*.yaml`` beside it (one team per file);
each file is read and reported on its own, and a table may name a catalog any file of the set
declares. YAML is loaded with libyaml's ``CSafeLoader`` when PyYAML has it.

Pruning (removing code-owned tables the file no longer lists) is the one destructive step, so it
needs positive evidence: a file that parsed without any error and lists ``tables:`` with at least
one entry. A missing, empty, ``{}``/``null``, undecodable or unreadable file never prunes; an
explicit ``tables: []`` prunes only with ``allow_empty_prune`` (``tablemgmt apply --prune``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from airflow_tablemgmt.core.actions import PLAIN_TABLE
from airflow_tablemgmt.core.dynamic import DynamicTableSpec, downstream_problem, find_cycle
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import WRITING as WRITING_CATALOG  # noqa: N811
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec, format_validation_error, short_repr

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

TABLES_YAML_ENV = "TABLEMGMT_TABLES_YAML"
#: Directory beside tables.yaml whose ``*.yaml`` / ``*.yml`` files declare more tables (one team per file).
TABLES_D = "tables.d"

# libyaml's parser when PyYAML was built with it: ~5x faster on a large file, same safe constructor
# (so the same Python objects, and the same errors for bad values).
_YAML_LOADER: type[Any] = (
    getattr(yaml, "CSafeLoader", yaml.SafeLoader) if yaml.__with_libyaml__ else yaml.SafeLoader
)


@dataclass(frozen=True)
class DeclarationError:
    """One table (or the file itself) that could not be loaded."""

    source: str
    table: str  # "catalog.namespace.name" as written, or "<file>"
    message: str


@dataclass
class LoadedDeclarations:
    source: str
    catalogs: list[CatalogSpec] = field(default_factory=list)
    tables: list[TableSpec] = field(default_factory=list)
    errors: list[DeclarationError] = field(default_factory=list)
    digest: str = ""
    # True only when the file parsed as a mapping with an explicit ``tables:`` list (even empty).
    # A missing, empty, ``{}``/``null`` or unreadable file declares nothing, so it never prunes.
    declares_tables: bool = False
    # table id -> hash of its entry (see entry_digest), for each table that validated.
    entry_digests: dict[str, str] = field(default_factory=dict)
    # How many tables reused their stored validated form instead of validating again.
    reused: int = 0
    # ``dynamic-tables:`` entries that validated; each one's maintenance view
    # (``DynamicTableSpec.table_spec()``, action ``refresh``) is also in ``tables``.
    dynamic_tables: list[DynamicTableSpec] = field(default_factory=list)
    # The name of every ``dynamic-tables:`` entry, also of those with errors.
    dynamic_names: set[str] = field(default_factory=set)

    def raise_for_errors(self) -> None:
        if self.errors:
            raise InvalidDeclaration("\n".join(e.message for e in self.errors))

    def may_prune(self, *, allow_empty_prune: bool = False) -> bool:
        """Whether code-owned tables missing from this file may be removed from the store.

        Only a file that parsed without any error and declares ``tables:`` (or ``dynamic-tables:``)
        explicitly; an explicit ``tables: []`` (which would remove every code-owned table) only
        when asked. Dynamic tables count as tables: a clean file listing at least one table or
        dynamic table prunes the code-owned tables and dynamic tables it no longer lists.
        """
        if self.errors or not self.declares_tables:
            return False
        return bool(self.tables) or allow_empty_prune


def default_tables_yaml() -> Path:
    """``$TABLEMGMT_TABLES_YAML``, else ``<dags folder>/tables.yaml``."""
    if os.environ.get(TABLES_YAML_ENV):
        return Path(os.environ[TABLES_YAML_ENV])
    dags = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER") or os.path.join(
        os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "dags"
    )
    return Path(dags) / "tables.yaml"


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


@dataclass
class ParsedDocument:
    """A document loaded and its catalogs validated; its tables not yet (they may name catalogs
    other files declare)."""

    out: LoadedDeclarations
    raw_tables: list[Any] | None = None
    raw_dynamic: list[Any] | None = None


def begin_parse(text: str, source: str) -> ParsedDocument:
    """YAML load and catalogs. Never raises."""
    doc = ParsedDocument(
        LoadedDeclarations(source=source, digest=hashlib.sha256(text.encode("utf-8", "replace")).hexdigest())
    )
    try:
        doc.raw_tables, doc.raw_dynamic = _parse_into(doc.out, text)
    except Exception as e:  # noqa: BLE001 - a last line of defence: the DAG file must keep its other DAGs
        doc.out.errors.append(_file_error(source, f"cannot be read: {type(e).__name__}: {_short(e)}"))
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
                _file_error(doc.out.source, f"cannot be read: {type(e).__name__}: {_short(e)}")
            )
        doc.raw_tables = None
    if doc.raw_dynamic is not None:
        try:
            _parse_dynamic(doc.out, doc.raw_dynamic, set(known_catalogs))
        except Exception as e:  # noqa: BLE001 - as in begin_parse
            doc.out.errors.append(
                _file_error(doc.out.source, f"cannot be read: {type(e).__name__}: {_short(e)}")
            )
        doc.raw_dynamic = None
    return doc.out


ReuseValidated = Callable[[str, str], "TableSpec | None"]


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
    (the models and their rules), of this module, and the registered action names."""
    from airflow_tablemgmt import core

    h = hashlib.sha256()
    for path in sorted(Path(core.__file__).parent.glob("*.py")) + [Path(__file__)]:
        h.update(path.name.encode())
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"?")
    from airflow_tablemgmt.core.actions import ACTIONS

    h.update(",".join(ACTIONS.names()).encode())
    return h.hexdigest()


def _file_error(source: str, message: str) -> DeclarationError:
    return DeclarationError(source, "<file>", f"{source}: {message}")


def _short(e: BaseException, limit: int = 500) -> str:
    text = str(e)
    return text if len(text) <= limit else text[:limit] + "..."


def _parse_into(out: LoadedDeclarations, text: str) -> tuple[list[Any] | None, list[Any] | None]:
    """``(tables:, dynamic-tables:)`` entries of the document, each None when not a list."""
    source = out.source
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader (C or Python)
    except Exception as e:  # noqa: BLE001 - YAMLError, but also ValueError for a 5,000-digit int
        out.errors.append(_file_error(source, f"not valid YAML: {_short(e)}"))
        return None, None
    if data is None:
        return None, None  # an empty file (or only comments): declares nothing
    if not isinstance(data, dict):
        out.errors.append(
            _file_error(source, f"expected a mapping with 'catalogs' and 'tables', got {type(data).__name__}")
        )
        return None, None
    unknown = [k for k in data if k not in ("version", "catalogs", "tables", "dynamic-tables")]
    if unknown:
        shown = sorted(short_repr(k) if not isinstance(k, str) else k for k in unknown)
        out.errors.append(
            _file_error(
                source, f"unknown top-level keys {shown}; allowed: version, catalogs, tables, dynamic-tables"
            )
        )
    if data.get("version", 1) != 1 or isinstance(data.get("version"), bool):
        out.errors.append(_file_error(source, f"version: must be 1, got {short_repr(data.get('version'))}"))
    _parse_catalogs(out, data.get("catalogs"))
    raw_dynamic = data.get("dynamic-tables")
    if raw_dynamic is not None and not isinstance(raw_dynamic, list):
        out.errors.append(
            _file_error(
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
            _file_error(source, f"tables: expected a list of tables, got {type(raw_tables).__name__}")
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
            _file_error(source, f"catalogs: expected a list of catalogs, got {type(raw_catalogs).__name__}")
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
                DeclarationError(source, label, f"{source}: {path}: {type(e).__name__}: {_short(e)}")
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
            msg = f"{source}: tables[{i}] (table {name}): {type(e).__name__}: {_short(e)}"
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
            msg = f"{where} (dynamic table {name}): {type(e).__name__}: {_short(e)}"
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


def with_stored_analysis(declared: DynamicTableSpec, stored: DynamicTableSpec | None) -> DynamicTableSpec:
    """``declared`` (from YAML) with what creation recorded on the stored definition: its schema, and
    its source tables while the query is unchanged. A YAML entry never carries these (Spark fills them
    at creation), so without this every parse would look like a change and wipe them."""
    if stored is None:
        return declared
    update: dict[str, Any] = {}
    if declared.columns is None and stored.columns is not None:
        update["columns"] = stored.columns
    if declared.source_tables is None and stored.source_tables is not None and stored.query == declared.query:
        update["source_tables"] = stored.source_tables
    return declared.model_copy(update=update) if update else declared


def check_dynamic_tables(
    files: list[LoadedDeclarations], stored: Mapping[str, DynamicTableSpec] | None = None
) -> set[str]:
    """Checks that need every dynamic table (the files' and the store's other ones): a ``freshness:
    downstream`` table needs an upstream dynamic table, and dynamic tables must not read each other
    in a cycle. A failing entry becomes an error of its file (and is left out); the others load.

    Also merges each declared definition with what its creation recorded (:func:`with_stored_analysis`),
    so its maintenance view is the one the store holds. Returns the sources it found errors in
    (their errors depend on the rest of the set, not only on their own bytes).
    """
    stored = dict(stored or {})
    declared: dict[str, tuple[LoadedDeclarations, DynamicTableSpec]] = {}
    for f in files:
        merged = [with_stored_analysis(d, stored.get(d.id)) for d in f.dynamic_tables]
        if any(m is not d for m, d in zip(merged, f.dynamic_tables, strict=True)):
            views = {m.id: m.table_spec() for m in merged}
            f.tables = [views.get(t.id, t) for t in f.tables]
            f.dynamic_tables = merged
        declared.update({d.id: (f, d) for d in f.dynamic_tables})
    if not declared:
        return set()
    definitions = {
        **{k: v for k, v in stored.items() if k not in declared},
        **{k: d for k, (_, d) in declared.items()},
    }
    # Entries with errors still name dynamic tables: their downstream tables are not blamed for them.
    known = set(definitions) | {n for f in files for n in f.dynamic_names}
    edges = {tid: d.upstream_candidates(known) for tid, d in definitions.items()}
    bad: dict[str, str] = {}
    for tid, (_, d) in declared.items():
        problem = downstream_problem(d, edges[tid])
        if problem is not None:
            bad[tid] = problem + f"; dynamic tables: {', '.join(sorted(known - {tid})) or 'none'}"
    remaining = {k: {u for u in v if u in definitions} for k, v in edges.items()}
    while (cycle := find_cycle(remaining)) is not None:
        members = set(cycle)
        for tid in members & set(declared):
            bad.setdefault(
                tid, f"query: dynamic tables would read each other in a cycle: {' -> '.join(cycle)}"
            )
        for tid in members:
            remaining.pop(tid, None)
        remaining = {k: v - members for k, v in remaining.items()}
    for tid, message in sorted(bad.items()):
        f, d = declared[tid]
        f.tables = [t for t in f.tables if t.id != tid]
        f.dynamic_tables = [x for x in f.dynamic_tables if x.id != tid]
        f.entry_digests.pop(tid, None)
        f.errors.append(DeclarationError(f.source, tid, f"{f.source}: dynamic table {tid}: {message}"))
    return {declared[tid][0].source for tid in bad}


def load_declarations(path: Path | str | None = None) -> LoadedDeclarations:
    """Read and validate a declarations file. Never raises.

    A missing file declares nothing (no error: store-only deployments have none). A directory, a
    broken symlink, a file the OS refuses to open or one that is not UTF-8 is an error of the file.
    None of these declares tables, so none of them prunes.
    """
    text, out = read_declarations_text(path)
    if text is None:
        return out
    return parse_declarations_text(text, out.source, known_catalogs=_sibling_catalogs(Path(out.source)))


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def _sibling_catalogs(path: Path) -> set[str]:
    """For a team file (``tables.d/<team>.yaml``) read on its own, e.g. by ``tablemgmt apply``: the
    catalogs the rest of its set declares (``../tables.yaml`` and the other team files), which its
    tables may name as they do in a DAG-file parse."""
    if path.parent.name != TABLES_D:
        return set()
    paths, _ = declaration_paths(path.parent.parent / "tables.yaml")
    names: set[str] = set()
    for other in paths:
        if other == path:
            continue
        text, out = read_declarations_text(other)
        if text is not None:
            names |= {c.name for c in begin_parse(text, out.source).out.catalogs}
    return names


def read_declarations_text(path: Path | str | None = None) -> tuple[str | None, LoadedDeclarations]:
    """``(text, empty result)`` of a readable file, else ``(None, result with the file's error)``
    (no error for a missing file). Never raises."""
    p = Path(path) if path is not None else default_tables_yaml()
    source = str(p)
    out = LoadedDeclarations(source=source)
    try:
        os.stat(p)
    except FileNotFoundError:
        if os.path.lexists(p):
            out.errors.append(_file_error(source, f"is a broken symlink (to {os.readlink(p)!r})"))
        return None, out
    except OSError as e:
        out.errors.append(_file_error(source, f"cannot be read: {e.strerror or e}"))
        return None, out
    if p.is_dir():
        out.errors.append(_file_error(source, "is a directory, not a file"))
        return None, out
    try:
        raw = p.read_bytes()
    except OSError as e:
        out.errors.append(_file_error(source, f"cannot be read: {e.strerror or e}"))
        return None, out
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        out.errors.append(
            _file_error(
                source, f"is not UTF-8 (byte {raw[e.start]:#04x} at offset {e.start}); save it as UTF-8"
            )
        )
        return None, out
    out.digest = hashlib.sha256(raw).hexdigest()
    return text, out


def declaration_paths(tables_yaml: Path | str | None = None) -> tuple[list[Path], list[DeclarationError]]:
    """``tables.yaml`` and, beside it, ``tables.d/*.yaml`` / ``*.yml`` sorted by name: the files
    that declare tables, in the order that decides which file wins a conflict. An unreadable
    ``tables.d`` is an error (and, like any error of a file, stops pruning)."""
    main = Path(tables_yaml) if tables_yaml is not None else default_tables_yaml()
    paths = [main]
    extra = main.parent / TABLES_D
    errors: list[DeclarationError] = []
    try:
        names = sorted(os.listdir(extra))
    except FileNotFoundError:
        return paths, errors
    except NotADirectoryError:
        errors.append(_file_error(str(extra), "is not a directory; put team files in tables.d/<team>.yaml"))
        return paths, errors
    except OSError as e:
        errors.append(_file_error(str(extra), f"cannot be listed: {e.strerror or e}"))
        return paths, errors
    paths += [extra / n for n in names if n.endswith((".yaml", ".yml")) and not n.startswith(".")]
    return paths, errors


def check_across_files(files: list[LoadedDeclarations]) -> None:
    """Catalogs and tables must be declared once across the set: a later file's repeat is an
    error of that file (so it does not prune), naming the file that declared it first."""
    catalog_at: dict[str, str] = {}
    table_at: dict[str, str] = {}
    for f in files:
        kept_catalogs = []
        for c in f.catalogs:
            if c.name in catalog_at:
                f.errors.append(
                    DeclarationError(
                        f.source,
                        f"catalog {c.name}",
                        f"{f.source}: catalogs.{c.name}: declared twice, also in {catalog_at[c.name]}; "
                        f"declare each catalog in one file",
                    )
                )
                continue
            catalog_at[c.name] = f.source
            kept_catalogs.append(c)
        f.catalogs = kept_catalogs
        kept = []
        for t in f.tables:
            if t.id in table_at:
                f.errors.append(
                    DeclarationError(
                        f.source,
                        t.id,
                        f"{f.source}: table {t.id}: declared twice, also in {table_at[t.id]}; "
                        f"declare each table in one file",
                    )
                )
                continue
            table_at[t.id] = f.source
            kept.append(t)
        f.tables = kept
        kept_ids = {t.id for t in kept}
        f.dynamic_tables = [d for d in f.dynamic_tables if d.id in kept_ids]


@dataclass
class ApplyReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    catalogs_changed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.removed or self.catalogs_changed)

    def __str__(self) -> str:
        return (
            f"{len(self.created)} created, {len(self.updated)} updated, {len(self.unchanged)} unchanged, "
            f"{len(self.removed)} removed; catalogs changed: {len(self.catalogs_changed)}"
        )


def apply_declarations(
    store: Store, loaded: LoadedDeclarations, *, prune: bool = True, allow_empty_prune: bool = False
) -> ApplyReport:
    """Upsert the file's catalogs and tables into the store (owned by code). Idempotent.

    With ``prune``, code-owned tables no longer in the file are soft-deleted — but only when the
    file loaded without errors and declares ``tables:`` with at least one entry, so a typo, an
    empty or a missing file never unregisters a table. An explicit ``tables: []`` prunes every
    code-owned table only with ``allow_empty_prune`` (``tablemgmt apply --prune``).
    """
    report = ApplyReport()
    if loaded.dynamic_tables:
        before = len(loaded.errors)
        if check_dynamic_tables([loaded], stored_dynamic_definitions(store)):
            # a downstream table without an upstream, a cycle: nothing is applied
            raise InvalidDeclaration("\n".join(e.message for e in loaded.errors[before:]))
    for catalog in loaded.catalogs:
        if store.catalogs.upsert(catalog, Owner.CODE):
            report.catalogs_changed.append(catalog.name)
    dynamic_ids = {d.id for d in loaded.dynamic_tables}
    plain = [t for t in loaded.tables if t.id not in dynamic_ids]
    for table_id, outcome in store.tables.upsert_many(plain, Owner.CODE).items():
        getattr(report, outcome).append(table_id)
    if loaded.dynamic_tables:
        for table_id, outcome in store.dynamic.upsert_many(loaded.dynamic_tables, Owner.CODE).items():
            getattr(report, outcome).append(table_id)
    if prune and loaded.may_prune(allow_empty_prune=allow_empty_prune):
        # Tables another declarations file wrote (by its sync record) are that file's to prune.
        from airflow_tablemgmt.store.declaration_files import DeclarationFileRepository

        others = {
            tid
            for source, rec in DeclarationFileRepository(store.engine).all().items()
            if _same_file(source, loaded.source) is False
            for tid in rec.entries
        }
        report.removed = store.tables.prune_code_tables({t.id for t in loaded.tables} | others)
    return report


def stored_dynamic_definitions(store: Store) -> dict[str, DynamicTableSpec]:
    """The store's dynamic tables' definitions by id (live ones)."""
    return {dt.id: dt.definition for dt in store.dynamic.list()}


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
