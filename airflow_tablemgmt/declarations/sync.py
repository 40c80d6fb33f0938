"""The one path from loaded declarations to the store: upsert, record, prune.

(Just over 400 lines on purpose: the one sync/prune path, its four pruning rules stated once and
applied in one place; the next split is the policies' part into declarations/policies.py beside its checks.)

Both writers call :func:`sync`: the DAG file on every parse (:data:`PrunePolicy.PARSE`, with the
registry it read and the sync records it writes) and ``tablemgmt apply`` (:meth:`PrunePolicy.apply`,
one file, strict). Catalogs and tables written here are owned by code: REST and the CLI refuse to
change them.

**The pruning rules** (pruning, removing code-owned tables the files no longer declare, is the one
destructive step, so it needs positive evidence):

1. Nothing is pruned when the policy says so (``apply --no-prune``), when any write of this sync
   failed, or when any file of the set has an error of the whole file (unreadable, not YAML, a bad
   ``tables.d``).
2. A file may prune only if it parsed without any error and declares ``tables:`` (or
   ``dynamic-tables:``) explicitly with at least one entry. A missing, empty, ``{}``/``null``,
   undecodable or unreadable file never prunes. An explicit ``tables: []`` (which would remove every
   table the file owns) prunes only under ``PrunePolicy.apply(allow_empty=True)``
   (``tablemgmt apply --prune``); the DAG file never prunes on it and logs (WARNING) the tables it
   keeps.
3. A file prunes only the tables it owns: the code-owned tables its own sync record lists and, for
   the main file (``tables.yaml`` in a DAG-file parse, the file given to ``apply``), the code-owned
   tables no other file's record lists. Records of files gone from the set count too, so a deleted
   team file's tables are nobody's to prune.
4. A table still declared by any file of the set (or named by an entry with errors) is never pruned,
   so a table moved between files survives.

Pruning is a soft delete (``deleted_at``); store-owned tables are never touched. ``policies:`` follow
these rules (``declarations/policies.py``), and a pruned policy is deleted (its enrolled tables are retired).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.declarations.checks import (
    check_dynamic_tables,
    is_cross_file,
    stored_dynamic_definitions,
)
from airflow_tablemgmt.declarations.model import FileSet, LoadedDeclarations
from airflow_tablemgmt.declarations.policies import prune_policies, sync_policies
from airflow_tablemgmt.store.declaration_files import DeclarationFileRecord, DeclarationFileRepository

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrunePolicy:
    """When a sync prunes (the rules are in this module's docstring).

    ``enabled``: prune at all. ``allow_empty``: an explicit ``tables: []`` prunes every table its file
    owns. ``warn_empty``: it does not, and the tables it keeps are logged (the DAG file's way).
    """

    enabled: bool = True
    allow_empty: bool = False
    warn_empty: bool = False

    #: The DAG file's parse: prunes, never on ``tables: []`` (logged instead).
    PARSE: ClassVar[PrunePolicy]
    #: ``tablemgmt apply --no-prune``.
    NEVER: ClassVar[PrunePolicy]

    @classmethod
    def apply(cls, allow_empty: bool = False) -> PrunePolicy:
        """``tablemgmt apply``: prune; ``tables: []`` only with ``allow_empty`` (``--prune``)."""
        return cls(enabled=True, allow_empty=allow_empty)


PrunePolicy.PARSE = PrunePolicy(enabled=True, allow_empty=False, warn_empty=True)
PrunePolicy.NEVER = PrunePolicy(enabled=False)


@dataclass
class SyncReport:
    """What a sync did. ``errors`` and ``left_out`` (declared tables the store refused) are only
    ever filled by a lenient sync (the DAG file's); a strict one raises instead."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    catalogs_changed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    left_out: set[str] = field(default_factory=set)
    policies: list[str] = field(default_factory=list)  # "<name> created|updated|removed"

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.removed or self.catalogs_changed or self.policies)

    def __str__(self) -> str:
        return (
            f"{len(self.created)} created, {len(self.updated)} updated, {len(self.unchanged)} unchanged, "
            f"{len(self.removed)} removed; catalogs changed: {len(self.catalogs_changed)}"
        ) + (f"; policies: {', '.join(self.policies)}" if self.policies else "")


#: The name ``tablemgmt apply`` has always reported with.
ApplyReport = SyncReport


def sync(
    store: Store,
    fs: FileSet,
    *,
    prune: PrunePolicy,
    registered: dict[str, Any] | None = None,
    strict: bool = False,
    record: bool = False,
) -> SyncReport:
    """Upsert the files' catalogs, tables and dynamic tables (owned by code), record each file's
    sync, then prune by ``prune`` (rules in the module docstring).

    ``registered``: the store's live rows by table id, as read before the sync (the DAG file has
    them): rows equal to their declaration are not written, and pruning judges ownership on this
    snapshot. Without it every table is upserted (the store reports it unchanged) and pruning reads
    the live rows itself. ``strict``: the first write the store refuses raises (nothing is pruned);
    otherwise it becomes an error of the report, the table (or every table of a refused catalog) is
    left out and its file is not recorded. ``record``: write the sync record of each file loaded from
    YAML whose tables all reached the store (what lets the next parse skip the file's YAML).
    """
    report = SyncReport()
    refused = _sync_catalogs(store, fs, report, strict)
    failed_sources: set[str] = set(fs.unrecorded)
    dynamic_ids = {d.id for f in fs.files for d in f.dynamic_tables}
    _sync_tables(store, fs, report, refused, dynamic_ids, failed_sources, registered, strict)
    if dynamic_ids:
        _sync_dynamic(store, fs, report, failed_sources, strict)
    sync_policies(store, fs, report, failed_sources, strict)
    if record:
        _record_files(store, fs, failed_sources)
    if prune.enabled:
        report.removed = _prune(store, fs, prune, registered, report.errors)
        report.policies += [f"{name} removed" for name in prune_policies(store, fs, prune, report.errors)]
    return report


def _sync_catalogs(store: Store, fs: FileSet, report: SyncReport, strict: bool) -> set[str]:
    """Upsert the catalogs of the files loaded from YAML; the names of those the store refused."""
    refused: set[str] = set()
    for f in fs.files:
        if f.source not in fs.parsed:
            continue  # unchanged since its record: its catalogs are in the store as declared
        for catalog in f.catalogs:
            try:
                if store.catalogs.upsert(catalog, Owner.CODE):
                    report.catalogs_changed.append(catalog.name)
            except Exception as e:  # noqa: BLE001 - lenient: the catalog's tables are left out
                if strict:
                    raise
                refused.add(catalog.name)
                report.errors.append(
                    str(e) if str(e).startswith(f"catalog {catalog.name}") else f"catalog {catalog.name}: {e}"
                )
    return refused


def _sync_tables(
    store: Store,
    fs: FileSet,
    report: SyncReport,
    refused: set[str],
    dynamic_ids: set[str],
    failed_sources: set[str],
    registered: dict[str, Any] | None,
    strict: bool,
) -> None:
    """Upsert the plain tables that differ from their row (new ones in one batch). A table whose
    catalog the store refused (e.g. a second catalog over another's warehouse) is left out: building
    it would give one physical table a second name."""
    to_write: list[TableSpec] = []
    for f in fs.files:
        for spec in f.tables:
            if spec.catalog in refused:
                report.left_out.add(spec.id)
                failed_sources.add(f.source)
                report.errors.append(
                    f"table {spec.id}: not registered, its catalog {spec.catalog} was refused (see above)"
                )
                continue
            if spec.id in dynamic_ids:
                continue  # written by _sync_dynamic, with its definition
            row = registered.get(spec.id) if registered is not None else None
            if (
                row is not None
                and row.managed_by == Owner.CODE
                and (f.source not in fs.parsed or row.spec == spec)
            ):
                report.unchanged.append(spec.id)
                continue
            problem = _location_problem(store, fs, spec, local_only=not strict)
            if problem is not None:
                if strict:
                    raise InvalidDeclaration(f"{f.source}: {problem}")
                report.left_out.add(spec.id)
                failed_sources.add(f.source)
                report.errors.append(f"{f.source}: {problem}")
                continue
            to_write.append(spec)
    if not to_write:
        return
    try:
        outcomes = store.tables.upsert_many(to_write, Owner.CODE)
    except Exception:  # noqa: BLE001 - lenient: find the tables it was about, one by one
        if strict:
            raise
        outcomes = {}
        for spec in to_write:
            try:
                outcomes[spec.id] = store.tables.upsert(spec, Owner.CODE)
            except Exception as e:  # noqa: BLE001
                report.left_out.add(spec.id)
                report.errors.append(f"table {spec.id}: {e}")
        failed_sources |= {f.source for f in fs.files if any(t.id in report.left_out for t in f.tables)}
    for table_id, outcome in outcomes.items():
        getattr(report, outcome).append(table_id)


def _location_problem(store: Store, fs: FileSet, spec: TableSpec, *, local_only: bool) -> str | None:
    """Why a new or changed table cannot be declared: its location is readable and holds no table of its
    format (``metadata/table_check.py``), or None. A location not readable here, or an Iceberg table not
    created yet, is logged (WARNING) and declared. ``local_only``: the DAG file's parse checks local
    locations only (no network calls at parse time); ``tablemgmt apply`` checks object stores too."""
    from airflow_tablemgmt.metadata.table_check import check_location, checked_by_path

    catalog = next((c for f in fs.files for c in f.catalogs if c.name == spec.catalog), None)
    if catalog is None:
        try:
            catalog = store.catalogs.get(spec.catalog)
        except Exception:  # noqa: BLE001 - the upsert reports a missing catalog
            return None
    if not checked_by_path(catalog, str(spec.format)):
        return None
    check = check_location(catalog, spec.identifier, str(spec.format), local_only=local_only)
    if check.warning is not None:
        log.warning("tablemgmt: table %s: %s", spec.id, check.warning)
    if check.missing and str(spec.format) == "iceberg":  # its writer may create it after the declaration
        log.warning("tablemgmt: table %s: %s; its runs are declined until it exists", spec.id, check.problem)
        return None
    if check.problem is None:
        return None
    return f"table {spec.id} (format {spec.format}): {check.problem}"


def _sync_dynamic(
    store: Store, fs: FileSet, report: SyncReport, failed_sources: set[str], strict: bool
) -> None:
    """Upsert the files' changed dynamic tables (owned by code; a new one is CREATING until its
    first refresh run creates it). Definitions equal to the stored ones cost no write."""
    stored = fs.stored_dynamic or {}
    to_write = []
    for f in fs.files:
        for d in f.dynamic_tables:
            if d.id in report.left_out:
                continue  # its catalog was refused (see _sync_tables)
            dt = stored.get(d.id)
            if dt is not None and dt.managed_by == Owner.CODE and dt.definition == d:
                report.unchanged.append(d.id)
                continue
            to_write.append((f.source, d))
    if not to_write:
        return
    try:
        outcomes = store.dynamic.upsert_many([d for _, d in to_write], Owner.CODE)
    except Exception:  # noqa: BLE001 - lenient: find the tables it was about, one by one
        if strict:
            raise
        outcomes = {}
        for source, d in to_write:
            try:
                outcomes[d.id] = store.dynamic.upsert(d, Owner.CODE)
            except Exception as e:  # noqa: BLE001
                report.left_out.add(d.id)
                failed_sources.add(source)
                report.errors.append(f"dynamic table {d.id}: {e}")
    for table_id, outcome in outcomes.items():
        getattr(report, outcome).append(table_id)


def _record_files(store: Store, fs: FileSet, failed_sources: set[str]) -> None:
    """Remember each file loaded from YAML whose tables all reached the store."""
    repo = DeclarationFileRepository.of(store)
    for f in fs.files:
        if f.source not in fs.parsed or f.source in failed_sources or not f.digest:
            continue
        own = [e for e in f.errors if not is_cross_file(e)]
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


def _prune(
    store: Store, fs: FileSet, policy: PrunePolicy, registered: dict[str, Any] | None, errors: list[str]
) -> list[str]:
    """The pruning rules of the module docstring; the ids it removed."""
    if errors or any(e.table == "<file>" for f in fs.files for e in f.errors):
        return []  # rule 1
    declared = {t.id for f in fs.files for t in f.tables} | {e.table for f in fs.files for e in f.errors}
    # Which files' records list each table: every record as it is now, also of files gone from the
    # set (rule 3). A file's own listing is its record from before this sync (fs.records), which
    # still names the tables it dropped.
    listed_in: dict[str, set[str]] = {}
    for r in DeclarationFileRepository.of(store).all().values():
        key = _file_key(r.source)
        for tid in r.entries:
            listed_in.setdefault(tid, set()).add(key)
    code_rows = (
        {tid for tid, r in registered.items() if r.managed_by == Owner.CODE}
        if registered is not None
        else None
    )
    doomed: set[str] = set()
    keep_besides: set[str] | None = None  # for the main file without a registry snapshot
    for i, f in enumerate(fs.files):
        before = fs.records.get(f.source)
        listed = set(before.entries) if before is not None else set()
        key = _file_key(f.source)

        def by_others(tid: str, key: str = key) -> bool:
            return bool(listed_in.get(tid, set()) - {key})

        if code_rows is None:
            own = None if i == 0 else listed
        elif i == 0:  # rule 3, the main file: also the code-owned tables no other record lists
            own = (listed & code_rows) | {t for t in code_rows if not by_others(t)}
        else:
            own = listed & code_rows
        if not f.may_prune(allow_empty_prune=policy.allow_empty):  # rule 2
            if policy.warn_empty and f.declares_tables and not f.errors:  # an explicit, empty `tables: []`
                kept = sorted((own if own is not None else listed) - declared)
                if kept:
                    _warn_empty(f, kept)
            continue
        if own is None:  # main file, no snapshot: the live code-owned rows decide (prune_code_tables)
            keep_besides = {t for t in listed_in if by_others(t)} - listed
            continue
        doomed |= own - declared  # rule 4
    removed: set[str] = set()
    if keep_besides is not None:
        removed |= set(store.tables.prune_code_tables(declared | keep_besides))
    if doomed - removed:
        removed |= set(store.tables.remove_code_tables(doomed - removed))
    return sorted(removed)


def _file_key(source: str) -> str:
    """A file's identity, so records of one file under two spellings count as one owner."""
    try:
        return str(Path(source).resolve())
    except OSError:
        return source


def _warn_empty(f: LoadedDeclarations, kept: list[str]) -> None:
    log.warning(
        "%s declares tables: [] — the DAG file does not remove the %d code-owned table(s) it "
        "would prune, and keeps their DAGs: %s; run `tablemgmt apply --prune %s` to remove them",
        f.source,
        len(kept),
        ", ".join(kept),
        f.source,
    )


def apply_declarations(
    store: Store, loaded: LoadedDeclarations, *, prune: bool = True, allow_empty_prune: bool = False
) -> SyncReport:
    """``tablemgmt apply``: :func:`sync` of one file, strict, with :meth:`PrunePolicy.apply`. Idempotent.

    Its dynamic tables are checked against the store's first (a downstream table needs an upstream,
    no cycles): any failure raises :class:`InvalidDeclaration` and nothing is applied.
    """
    if loaded.dynamic_tables:
        before = len(loaded.errors)
        if check_dynamic_tables([loaded], stored_dynamic_definitions(store)):
            raise InvalidDeclaration("\n".join(e.message for e in loaded.errors[before:]))
    fs = FileSet([loaded], records={}, parsed={loaded.source}, stored_dynamic=None)
    policy = PrunePolicy.apply(allow_empty_prune) if prune else PrunePolicy.NEVER
    return sync(store, fs, prune=policy, strict=True)
