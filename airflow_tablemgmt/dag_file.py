"""What the DAG file in the dags folder calls: read the registry once, build the DAGs.

The registry is the declarations files — ``dags/tables.yaml`` and ``dags/tables.d/*.yaml`` (owned
by code) — merged with tables registered through REST or the CLI (owned by the store). Entries that
differ from the store are upserted here (new ones in one batch), so the store always reflects the
files; unchanged entries cost no write. Each clean sync is recorded per file (its digest, and per
table the entry's digest and the row it left), so a later parse of an unchanged file reads no YAML
and a task start reads one table row. Pruning is per file: a clean file listing at least one table
removes the code-owned tables it wrote and no file declares any more; an explicit ``tables: []``
is logged (WARNING, with the tables it would remove) and changes nothing; any broken file stops
all pruning.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.errors import TableNotFound, UnreadableTable
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.dag_factory import BuildResult, build_dags, cyclic_gc_paused, parse_dag_id
from airflow_tablemgmt.declarations import (
    DeclarationError,
    LoadedDeclarations,
    ParsedDocument,
    ReuseValidated,
    begin_parse,
    check_across_files,
    check_dynamic_tables,
    declaration_paths,
    finish_parse,
    read_declarations_text,
    validation_fingerprint,
)
from airflow_tablemgmt.store.declaration_files import DeclarationFileRecord, DeclarationFileRepository

log = logging.getLogger(__name__)


@dataclass
class _FileSet:
    """Every declarations file of one parse, loaded (from the store's record or the YAML)."""

    files: list[LoadedDeclarations]
    records: dict[str, DeclarationFileRecord]
    # Sources loaded from YAML this parse (their record is rewritten after a clean sync).
    parsed: set[str] = field(default_factory=set)
    contexts: dict[str, str] = field(default_factory=dict)
    # The store's dynamic tables by id (read only when a parsed file declares dynamic tables);
    # None when they could not be read.
    stored_dynamic: dict[str, Any] | None = field(default_factory=dict)
    # Files whose errors depend on more than their bytes (a dynamic table's upstreams): not recorded,
    # so the next parse checks them again.
    unrecorded: set[str] = field(default_factory=set)

    @property
    def errors(self) -> list[str]:
        return [e.message for f in self.files for e in f.errors]

    @property
    def declared(self) -> dict[str, TableSpec]:
        return {t.id: t for f in self.files for t in f.tables}


def _context(external_catalogs: set[str]) -> str:
    return hashlib.sha256(
        (validation_fingerprint() + "\n" + ",".join(sorted(external_catalogs))).encode()
    ).hexdigest()


def _load_files(
    tables_yaml: str | Path | None,
    store: Any,
    registered: dict[str, Any] | None,
    catalogs: dict[str, CatalogSpec],
    *,
    use_records: bool = True,
) -> _FileSet:
    """Load ``tables.yaml`` and ``tables.d/*.yaml``.

    A file whose bytes and validation context match its record, and whose recorded rows are
    unchanged (``registered`` given), is taken from the store without reading its YAML. Other
    files are loaded with libyaml; an entry whose digest, context and row match the record reuses
    the stored spec, every other entry is validated.
    """
    paths, path_errors = declaration_paths(tables_yaml)
    texts: dict[str, str | None] = {}
    files: list[LoadedDeclarations] = []
    for path in paths:
        text, out = read_declarations_text(path)
        texts[out.source] = text
        files.append(out)
    if path_errors:
        files[0].errors.extend(path_errors)
    records = _records(store).get_many([f.source for f in files]) if use_records else {}
    fs = _FileSet(files, records)
    # Pass 1: each file's catalogs, from its record when the bytes are unchanged, else from YAML.
    docs: dict[str, ParsedDocument] = {}
    own_catalogs: dict[str, set[str]] = {}
    for f in files:
        rec = records.get(f.source)
        if texts[f.source] is None:
            own_catalogs[f.source] = set()
        elif rec is not None and rec.digest == f.digest and all(c in catalogs for c in rec.catalogs):
            own_catalogs[f.source] = set(rec.catalogs)
        else:
            docs[f.source] = begin_parse(texts[f.source] or "", f.source)
            own_catalogs[f.source] = {c.name for c in docs[f.source].out.catalogs}
    everywhere = set().union(*own_catalogs.values()) if own_catalogs else set()
    # Pass 2: tables.
    for i, f in enumerate(files):
        if texts[f.source] is None:
            continue
        context = fs.contexts[f.source] = _context(everywhere - own_catalogs[f.source])
        rec = records.get(f.source)
        if f.source not in docs and rec is not None:
            from_record = _from_record(f, rec, context, registered, catalogs)
            if from_record is not None:
                files[i] = from_record
                continue
            docs[f.source] = begin_parse(texts[f.source] or "", f.source)
        reuse = _reuse_from(rec, context, registered)
        files[i] = finish_parse(
            docs[f.source], known_catalogs=everywhere - own_catalogs[f.source], reuse=reuse
        )
        fs.parsed.add(f.source)
    check_across_files(files)
    if any(f.dynamic_tables for f in files):
        _check_dynamic(store, fs)
    return fs


def _check_dynamic(store: Any, fs: _FileSet) -> None:
    """Downstream tables need an upstream, no cycles: checked against the store's dynamic tables too."""
    try:
        fs.stored_dynamic = {dt.id: dt for dt in store.dynamic.list()}
    except Exception as e:  # noqa: BLE001 - the dynamic tables are left out, everything else loads
        fs.stored_dynamic = None
        log.warning("could not read the store's dynamic tables", exc_info=True)
        for f in fs.files:
            for d in f.dynamic_tables:
                f.errors.append(
                    DeclarationError(
                        f.source,
                        d.id,
                        f"{f.source}: dynamic table {d.id}: not synced, the store's dynamic tables "
                        f"cannot be read: {type(e).__name__}: {e}",
                    )
                )
            ids = {d.id for d in f.dynamic_tables}
            f.tables = [t for t in f.tables if t.id not in ids]
            f.dynamic_tables = []
            fs.unrecorded.add(f.source)
        return
    fs.unrecorded |= check_dynamic_tables(
        fs.files, {tid: dt.definition for tid, dt in fs.stored_dynamic.items()}
    )


def _from_record(
    f: LoadedDeclarations,
    rec: DeclarationFileRecord,
    context: str,
    registered: dict[str, Any] | None,
    catalogs: dict[str, CatalogSpec],
) -> LoadedDeclarations | None:
    """The file as its record says, when that is provably what the YAML would give; else None."""
    if rec.digest != f.digest or rec.context != context or registered is None:
        return None
    tables: list[TableSpec] = []
    for table_id, (_, updated) in rec.entries.items():
        row = registered.get(table_id)
        if row is None or row.managed_by != Owner.CODE or row.updated_at.isoformat() != updated:
            return None  # the row changed (or went) since this file wrote it
        tables.append(row.spec)
    return LoadedDeclarations(
        source=f.source,
        catalogs=[catalogs[c] for c in rec.catalogs],
        tables=tables,
        errors=[DeclarationError(f.source, t, m) for t, m in rec.errors],
        digest=f.digest,
        declares_tables=rec.declares_tables,
        entry_digests={tid: d for tid, (d, _) in rec.entries.items()},
        reused=len(tables),
    )


def _reuse_from(
    rec: DeclarationFileRecord | None, context: str, registered: dict[str, Any] | None
) -> ReuseValidated | None:
    if rec is None or rec.context != context or registered is None:
        return None

    def reuse(name: str, digest: str) -> TableSpec | None:
        entry = rec.entries.get(name)
        row = registered.get(name)
        if entry is None or row is None or entry[0] != digest:
            return None
        if row.managed_by != Owner.CODE or row.updated_at.isoformat() != entry[1]:
            return None
        return row.spec  # type: ignore[no-any-return]

    return reuse


def _records(store: Any) -> DeclarationFileRepository:
    store.tables  # noqa: B018 - brings the schema up to date first
    return DeclarationFileRepository(store.engine)


def _sync_yaml(store: Any, fs: _FileSet, registered: dict[str, Any]) -> tuple[list[str], list[str], set[str]]:
    """Upsert the files' catalogs and changed tables (new tables in one batch); prune per file.

    Returns ``(errors, pruned table ids, ids of declared tables left out)``. A table whose catalog
    the store refused (e.g. a second catalog over another's warehouse) is left out: building it
    would give one physical table a second name. Any error here, and any error of a whole file,
    stops all pruning. A clean file that lists tables prunes only the code-owned tables it wrote
    itself (by its record; ``tables.yaml`` also those no file has a record of) that no file
    declares now, so a table moved between files is never pruned. An explicit ``tables: []``
    never prunes here (only ``tablemgmt apply --prune`` does): it is logged.
    """
    errors: list[str] = []
    refused: set[str] = set()
    for f in fs.files:
        if f.source not in fs.parsed:
            continue  # unchanged since its record: its catalogs are in the store as declared
        for catalog in f.catalogs:
            try:
                store.catalogs.upsert(catalog, Owner.CODE)
            except Exception as e:  # noqa: BLE001
                refused.add(catalog.name)
                errors.append(
                    str(e) if str(e).startswith(f"catalog {catalog.name}") else f"catalog {catalog.name}: {e}"
                )
    left_out: set[str] = set()
    to_write: list[TableSpec] = []
    failed_sources: set[str] = set(fs.unrecorded)
    dynamic_ids = {d.id for f in fs.files for d in f.dynamic_tables}
    for f in fs.files:
        for spec in f.tables:
            if spec.catalog in refused:
                left_out.add(spec.id)
                failed_sources.add(f.source)
                errors.append(
                    f"table {spec.id}: not registered, its catalog {spec.catalog} was refused (see above)"
                )
                continue
            if spec.id in dynamic_ids:
                continue  # written below, with its definition
            row = registered.get(spec.id)
            if (
                row is not None
                and row.managed_by == Owner.CODE
                and (f.source not in fs.parsed or row.spec == spec)
            ):
                continue
            to_write.append(spec)
    if to_write:
        try:
            store.tables.upsert_many(to_write, Owner.CODE)
        except Exception:  # noqa: BLE001 - find the tables it was about, one by one
            for spec in to_write:
                try:
                    store.tables.upsert(spec, Owner.CODE)
                except Exception as e:  # noqa: BLE001
                    left_out.add(spec.id)
                    errors.append(f"table {spec.id}: {e}")
            failed_sources |= {f.source for f in fs.files if any(t.id in left_out for t in f.tables)}
    if dynamic_ids:
        _sync_dynamic(store, fs, left_out, failed_sources, errors)
    _record_files(store, fs, failed_sources)
    return errors, _prune(store, fs, registered, errors), left_out


def _sync_dynamic(
    store: Any, fs: _FileSet, left_out: set[str], failed_sources: set[str], errors: list[str]
) -> None:
    """Upsert the files' changed dynamic tables (owned by code; a new one is CREATING until its
    first refresh run creates it). Definitions equal to the stored ones cost no write."""
    stored = fs.stored_dynamic or {}
    to_write = []
    for f in fs.files:
        for d in f.dynamic_tables:
            if d.id in left_out:
                continue  # its catalog was refused (see _sync_yaml)
            dt = stored.get(d.id)
            if dt is not None and dt.managed_by == Owner.CODE and dt.definition == d:
                continue
            to_write.append((f.source, d))
    if not to_write:
        return
    try:
        store.dynamic.upsert_many([d for _, d in to_write], Owner.CODE)
    except Exception:  # noqa: BLE001 - find the tables it was about, one by one
        for source, d in to_write:
            try:
                store.dynamic.upsert(d, Owner.CODE)
            except Exception as e:  # noqa: BLE001
                left_out.add(d.id)
                failed_sources.add(source)
                errors.append(f"dynamic table {d.id}: {e}")


def _record_files(store: Any, fs: _FileSet, failed_sources: set[str]) -> None:
    """Remember each file loaded from YAML whose tables all reached the store."""
    repo = _records(store)
    for f in fs.files:
        if f.source not in fs.parsed or f.source in failed_sources or not f.digest:
            continue
        own = [e for e in f.errors if not _is_cross_file(e)]
        ids = [t.id for t in f.tables]
        try:
            stamps = store.tables.updated_at_of(ids)
            if len(stamps) != len(ids):
                continue  # a row went (or changed owner) meanwhile: load this file in full next time
            repo.put(
                DeclarationFileRecord(
                    source=f.source,
                    digest=f.digest,
                    context=fs.contexts[f.source],
                    declares_tables=f.declares_tables,
                    catalogs=[c.name for c in f.catalogs],
                    entries={tid: (f.entry_digests[tid], stamps[tid].isoformat()) for tid in ids},
                    errors=[(e.table, e.message) for e in own],
                )
            )
        except Exception:  # noqa: BLE001 - a record is an optimisation; the next parse loads the YAML
            log.warning("could not record the sync of %s", f.source, exc_info=True)


def _is_cross_file(e: DeclarationError) -> bool:
    return "declared twice, also in " in e.message


def _prune(store: Any, fs: _FileSet, registered: dict[str, Any], errors: list[str]) -> list[str]:
    if errors or any(e.table == "<file>" for f in fs.files for e in f.errors):
        return []
    declared = {t.id for f in fs.files for t in f.tables} | {e.table for f in fs.files for e in f.errors}
    # Every record, also of files gone from the set: a deleted team file never prunes (it is
    # missing), and its tables are not tables.yaml's to prune either.
    attributed = {tid for r in _records(store).all().values() for tid in r.entries}
    code_rows = {tid for tid, r in registered.items() if r.managed_by == Owner.CODE}
    doomed: set[str] = set()
    for i, f in enumerate(fs.files):
        rec = fs.records.get(f.source)
        own = (set(rec.entries) if rec is not None else set()) | (code_rows - attributed if i == 0 else set())
        own &= code_rows
        if f.may_prune():
            doomed |= own - declared
        elif f.declares_tables and not f.errors and own - declared:  # an explicit, empty `tables: []`
            kept = sorted(own - declared)
            log.warning(
                "%s declares tables: [] — the DAG file does not remove the %d code-owned table(s) it "
                "would prune, and keeps their DAGs: %s; run `tablemgmt apply --prune %s` to remove them",
                f.source,
                len(kept),
                ", ".join(kept),
                f.source,
            )
    return store.tables.remove_code_tables(doomed) if doomed else []


def load_registry_and_build(
    tables_yaml: str | Path | None = None, *, only_dag_id: str | None = None, store: Any = None
) -> BuildResult:
    """Every DAG of the registry (or only ``only_dag_id``). Never fails as a whole: an unreadable
    declarations file, a bad entry or a stored row that no longer validates becomes a declaration
    error (an import error of the DAG file in Airflow) naming it, and every other table's DAGs build.

    The registry is ``tables.yaml`` plus ``tables.d/*.yaml`` beside it, and the store. A file
    unchanged since its last sync is not read as YAML (its tables are the store's rows); a task
    start reads one table row when every file is in sync.
    """
    from airflow_tablemgmt.factories.discovery import default_factories

    if store is None:
        from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

        store = TableMgmtHook().get_store()
    wanted = parse_dag_id(only_dag_id) if only_dag_id else None
    stored_catalogs, unreadable_catalogs = store.catalogs.list_with_errors()
    catalogs = {c.name: c for c in stored_catalogs}
    specs: dict[str, TableSpec] = {}
    errors: list[str] = []
    if wanted is not None:
        errors, spec = _one_table(tables_yaml, store, wanted[0], catalogs)
        if spec is not None:
            specs[spec.id] = spec
        files: list[LoadedDeclarations] = []
    else:
        with cyclic_gc_paused():  # thousands of long-lived specs, no garbage
            rows, unreadable = store.tables.list_with_errors()
            registered = {r.spec.id: r for r in rows}
            fs = _load_files(tables_yaml, store, registered, catalogs)
        declared = fs.declared
        errors = fs.errors
        # A row the file declares is rewritten from the file just below; report only the others.
        errors += [u.message for u in unreadable if u.table_id not in declared]
        sync_errors, pruned, left_out = _sync_yaml(store, fs, registered)
        errors += sync_errors
        specs = {tid: r.spec for tid, r in registered.items() if tid not in pruned}
        # The files win for the tables they declare (those the store refused keep their stored row).
        specs.update({tid: spec for tid, spec in declared.items() if tid not in left_out})
        files = fs.files
    for f in files:
        catalogs.update({c.name: c for c in f.catalogs})
    errors += [u.message for u in unreadable_catalogs if u.name not in catalogs]
    if wanted is None and only_dag_id is None:
        from airflow_tablemgmt.dag_cache import build_with_cache

        # Unchanged tables' DAGs come from the per-host cache of built DAGs; the others are built.
        return build_with_cache(
            sorted(specs.values(), key=lambda s: s.id),
            default_factories(),
            declaration_errors=errors,
            catalogs=catalogs,
            tables_yaml=tables_yaml,
        )
    return build_dags(
        sorted(specs.values(), key=lambda s: s.id),
        default_factories(),
        only_dag_id=only_dag_id,
        declaration_errors=errors,
        catalogs=catalogs,
    )


def _one_table(
    tables_yaml: str | Path | None, store: Any, table_id: str, catalogs: dict[str, CatalogSpec]
) -> tuple[list[str], TableSpec | None]:
    """The spec a starting task builds its DAG from: the store's row when every declarations file
    is in sync with its record (one row read, whatever the files' size); else, if a file changed
    since its last sync (an edit the dag-processor has not parsed yet), that file's declaration of
    the table — only the changed files are loaded, nothing is written — else the row."""
    errors: list[str] = []
    try:
        row = store.tables.get_registered(table_id)
    except TableNotFound:
        row = None
    except UnreadableTable as e:
        row = None
        errors.append(str(e))
    paths, path_errors = declaration_paths(tables_yaml)
    if path_errors:
        errors += [e.message for e in path_errors]
    records = _records_of_one(store, [str(p) for p in paths], table_id)
    everywhere = {c for r in records.values() for c in r.catalogs}
    stale: list[tuple[str, LoadedDeclarations]] = []
    for path in paths:
        text, out = read_declarations_text(path)
        rec = records.get(out.source)
        if text is None:
            errors += [e.message for e in out.errors]
            continue  # missing or unreadable: declares nothing, its tables keep their rows
        if rec is None or rec.digest != out.digest or rec.context != _context(everywhere - set(rec.catalogs)):
            stale.append((text, out))
        elif table_id in rec.entries and (
            row is None
            or row.managed_by != Owner.CODE
            or row.updated_at.isoformat() != rec.entries[table_id][1]
        ):
            stale.append((text, out))
    if not stale:
        return errors, (row.spec if row is not None else None)
    docs = [begin_parse(text, out.source) for text, out in stale]
    known = set(catalogs) | {c.name for d in docs for c in d.out.catalogs}
    for doc in docs:
        loaded = finish_parse(doc, known_catalogs=known - {c.name for c in doc.out.catalogs})
        catalogs.update({c.name: c for c in loaded.catalogs})
        for spec in loaded.tables:
            if spec.id == table_id:
                return [], spec
        errors += [e.message for e in loaded.errors if e.table in (table_id, "<file>")]
    return errors, (row.spec if row is not None else None)


def _records_of_one(store: Any, sources: list[str], table_id: str) -> dict[str, DeclarationFileRecord]:
    """The files' sync records with only ``table_id``'s entry, extracted by the database (a record
    lists every table of its file: decoding 10,000 entries was most of a task start's registry read)."""
    from sqlalchemy import select

    from airflow_tablemgmt.store.models import DeclarationFileRow

    if not sources:
        return {}
    t = DeclarationFileRow.__table__
    store.tables  # noqa: B018 - brings the schema up to date first
    query = select(
        t.c.source,
        t.c.digest,
        t.c.context,
        t.c.declares_tables,
        t.c.catalogs,
        t.c.entries[table_id].label("entry"),
    ).where(t.c.source.in_(sources))
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    return {
        r.source: DeclarationFileRecord(
            source=r.source,
            digest=r.digest,
            context=r.context,
            declares_tables=bool(r.declares_tables),
            catalogs=list(r.catalogs or []),
            entries={table_id: (str(r.entry[0]), str(r.entry[1]))} if r.entry else {},
        )
        for r in rows
    }


def register_dags(namespace: dict[str, Any], tables_yaml: str | Path | None = None) -> BuildResult:
    """Put the DAGs into the caller's module namespace (``register_dags(globals())``)."""
    from airflow.sdk import get_parsing_context

    only = get_parsing_context().dag_id
    result = load_registry_and_build(tables_yaml, only_dag_id=only)
    for dag_id, dag in result.dags.items():
        namespace[dag_id] = dag
    return result
