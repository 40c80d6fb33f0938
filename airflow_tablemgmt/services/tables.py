"""Table operations: register (create or update), list, show, remove.

Register is an update of what was given, never a silent replacement: an existing table keeps every
field and every action the request does not name. Replacing the whole action set is explicit
(``replace_actions``) and the result lists what it removed.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import TableManagedByCode, TableNotFound
from airflow_tablemgmt.core.tables import Owner, TableSpec, parse_table
from airflow_tablemgmt.metadata.format_views import TABS as VIEW_TABS
from airflow_tablemgmt.services.catalogs import build_catalog, ensure_catalog
from airflow_tablemgmt.services.errors import InvalidInput

if TYPE_CHECKING:
    from airflow_tablemgmt.store import RegisteredTable, Store, UpsertResult

log = logging.getLogger(__name__)

_SCALARS = ("format", "owner", "queue", "priority")


@dataclass(frozen=True)
class RegisterRequest:
    """What a caller asked to register. Only the fields given change an existing table.

    ``spec`` is a (partial) table document as in tables.yaml (``--file`` or a REST body);
    ``table`` (catalog.namespace.table) names the table when ``spec`` does not. ``actions`` enables
    actions; ``options`` sets action options (``{"rewrite-files": {"min-input-files": 2}}``).
    """

    table: str | None = None
    spec: Mapping[str, Any] | None = None
    format: str | None = None
    owner: str | None = None
    queue: str | None = None
    priority: int | None = None
    actions: Sequence[str] = ()
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    replace_actions: bool = False
    catalog_type: str | None = None
    warehouse: str | None = None
    source: str = "register"


@dataclass(frozen=True)
class RegisterResult:
    table_id: str
    outcome: UpsertResult
    removed_actions: list[str] = field(default_factory=list)
    catalog_created: bool = False
    #: What the caller should hear without the registration failing (a location not readable here).
    warnings: list[str] = field(default_factory=list)


def parse_sets(pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``ACTION.OPTION=VALUE`` pairs (values read as YAML scalars) as ``{action: {option: value}}``."""
    actions: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        action, dot, option = key.partition(".")
        if not sep or not dot or not action or not option:
            raise InvalidInput(
                f"--set: {pair!r} must look like ACTION.OPTION=VALUE, e.g. expire-snapshots.retain-last=3"
            )
        try:
            actions.setdefault(action, {})[option] = yaml.safe_load(value)
        except yaml.YAMLError:
            actions.setdefault(action, {})[option] = value
    return actions


def load_spec_file(path: str | Path, argument: str = "--file") -> dict[str, Any]:
    """A table spec document from a YAML/JSON file, or :class:`InvalidInput` saying what is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{argument}: {p}: no such file") from None
    except IsADirectoryError:
        raise InvalidInput(f"{argument}: {p} is a directory, not a table spec file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{argument}: cannot read {p}: {e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        raise InvalidInput(f"{argument}: {p} is not valid YAML{at}: {getattr(e, 'problem', e)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidInput(
            f"{argument}: {p} must hold one table spec (a mapping with catalog, namespace, name, actions), "
            f"got a {type(data).__name__}"
        )
    return data


def _split_id(table: str) -> dict[str, str]:
    """The first part is the catalog, the last the table, everything between the namespace (``a.b``)."""
    parts = table.split(".")
    if len(parts) < 3 or not all(parts):
        raise InvalidInput(
            f"table: {table!r} must be catalog.namespace.table, e.g. lake.sales.orders (a namespace of "
            "several levels: lake.sales.eu.orders)"
        )
    return {"catalog": parts[0], "namespace": ".".join(parts[1:-1]), "name": parts[-1]}


def _live(store: Store, table_id: str) -> RegisteredTable | None:
    try:
        return store.tables.get_registered(table_id)
    except TableNotFound:
        return None


def register_table(store: Store, req: RegisterRequest) -> RegisterResult:
    """Create the table, or update an existing one with only what ``req`` gives.

    Validates everything (table, actions, catalog) before writing anything. A catalog may be
    created here but never changed (:class:`CatalogConflict`). A table declared in tables.yaml
    refuses (:class:`TableManagedByCode`).
    """
    data: dict[str, Any] = copy.deepcopy(dict(req.spec or {}))
    if req.table:
        data.update(_split_id(req.table))
    if not all(data.get(k) for k in ("catalog", "namespace", "name")):
        raise InvalidInput(
            f"{req.source}: give TABLE (catalog.namespace.table) or a spec with catalog, namespace, name"
        )
    for key in _SCALARS:
        if getattr(req, key) is not None:
            data[key] = getattr(req, key)
    given = data.pop("actions", None) or {}
    if not isinstance(given, Mapping) or not all(isinstance(v, Mapping | None) for v in given.values()):
        raise InvalidInput(f"{req.source}: actions must map action names to their options, got {given!r}")
    given = {name: dict(opts or {}) for name, opts in given.items()}
    for name in req.actions:
        ACTIONS.get(name)  # unknown names fail here with the list of known ones
        given.setdefault(name, {})
    for name, opts in req.options.items():
        given.setdefault(name, {}).update(opts)

    table_id = f"{data['catalog']}.{data['namespace']}.{data['name']}"
    existing = _live(store, table_id)
    if existing is not None and existing.managed_by == Owner.CODE:
        raise TableManagedByCode(table_id)
    if existing is not None and existing.managed_by == Owner.POLICY:
        # A declaration takes a policy's table over: it starts from what it gives (and the table's format),
        # never from the policies' effective settings, which would become the table's own.
        data.setdefault("format", str(existing.spec.format))
        existing = None
    removed: list[str] = []
    if existing is None:
        actions = given
    else:
        base = existing.spec.model_dump(mode="json", by_alias=True)
        data = {**base, **data}
        if req.replace_actions:
            actions = given
            removed = sorted(set(existing.spec.actions) - set(actions))
        else:
            actions = copy.deepcopy(base.get("actions") or {})
            for name, opts in given.items():
                merged = dict(actions.get(name) or {})
                if name in req.actions and "enabled" not in opts and merged.get("enabled") is False:
                    del merged["enabled"]  # --action X enables X again
                merged.update(opts)
                actions[name] = merged
    data["actions"] = actions
    spec: TableSpec = parse_table(data, req.source)  # validate everything before writing anything

    catalog_created = False
    if req.warehouse is not None or req.catalog_type is not None:
        wanted = build_catalog(
            spec.catalog, type=req.catalog_type, warehouse=req.warehouse, source="--catalog-type/--warehouse"
        )
        catalog_created = ensure_catalog(
            store, wanted, type_given=req.catalog_type is not None, warehouse_given=req.warehouse is not None
        )
        catalog = wanted
    else:
        catalog = store.catalogs.get(spec.catalog)  # the catalog must exist
    warnings = location_warnings(catalog, spec, req.source)
    outcome = store.tables.upsert(spec, Owner.STORE)
    return RegisterResult(spec.id, outcome, removed, catalog_created, warnings)


def location_warnings(catalog: Any, spec: TableSpec, source: str) -> list[str]:
    """Refuse (:class:`InvalidInput`) a table whose location is readable here and holds no table of its
    format, naming what is there; a location not readable here is a warning (the job reads it where it
    runs). Tables not found by path (those of a catalog that looks them up by name) are not checked here."""
    from airflow_tablemgmt.metadata.table_check import check_location, checked_by_path

    if not checked_by_path(catalog, str(spec.format)):
        return []
    try:
        from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec

        resolved = resolve_catalog_spec(catalog)
    except Exception as e:  # noqa: BLE001 - a reference that does not resolve here: not readable here
        return [f"table {spec.id}: its location is not readable here ({e}); the job reads it where it runs"]
    check = check_location(resolved, spec.identifier, str(spec.format))
    if check.may_appear_later:  # its writer may create it after the declaration
        log.warning("tablemgmt: table %s: %s", spec.id, check.problem)
        return [f"table {spec.id}: {check.problem}; its runs are declined until it exists"]
    if check.problem is not None:
        raise InvalidInput(f"{source}: table {spec.id} (format {spec.format}): {check.problem}")
    if check.warning is not None:
        log.warning("tablemgmt: table %s: %s", spec.id, check.warning)
        return [f"table {spec.id}: {check.warning}"]
    return []


@dataclass(frozen=True)
class TableSummary:
    table: str
    format: str
    managed_by: str
    owner: str
    queue: str
    actions: list[str]
    removed: bool = False
    policy: str | None = None  # the policy that enrolled it (managed_by policy)

    @property
    def managed(self) -> str:
        """Who manages it, in words: ``code``, ``store``, or ``policy <name>``."""
        return f"policy {self.policy}" if self.policy else self.managed_by


def list_tables(store: Store, *, include_removed: bool = False) -> list[TableSummary]:
    return [
        TableSummary(
            r.spec.id,
            str(r.spec.format),
            str(r.managed_by),
            r.spec.owner,
            r.spec.queue,
            r.spec.enabled_actions(),
            r.deleted_at is not None,
            r.policy,
        )
        for r in store.tables.list(include_deleted=include_removed)
    ]


def show_table(store: Store, table_id: str) -> dict[str, Any]:
    """The table's spec, and per enabled action its effective options and last process."""
    reg = store.tables.get_registered(table_id)
    out: dict[str, Any] = {
        "table": reg.spec.id,
        "managed_by": str(reg.managed_by),
        **({"policy": reg.policy} if reg.policy else {}),
        "spec": reg.spec.model_dump(mode="json", by_alias=True),
        "actions": {},
    }
    for action in reg.spec.enabled_actions():
        last = store.processes.list(table_id=reg.spec.id, action=action, limit=1)
        out["actions"][action] = {
            "options": reg.spec.action_settings(action).options(),
            "last_process": last[0].to_dict() if last else None,
        }
    return out


def remove_table(store: Store, table_id: str) -> None:
    """Soft-delete a store-owned table (its process history stays)."""
    store.tables.remove(table_id, Owner.STORE)


#: The table page's metadata tabs; each format's descriptor names its readers (``Format.views``).
TABS = VIEW_TABS


def table_metadata(store: Store, table_id: str, tab: str) -> dict[str, Any]:
    """The Details, Files or Snapshots tab of a live table, read by the view its format declared (no JVM) on
    its catalog with the secret references resolved; Details adds the owner and the catalog from the store.
    A format that declares no such view is an InvalidInput naming the table, its format and the formats
    that have one."""
    if tab not in TABS:
        raise InvalidInput(f"tab: {tab!r} is not a metadata tab; allowed: {', '.join(TABS)}")
    reg = store.tables.get_registered(table_id)
    spec = reg.spec
    from airflow_tablemgmt.factories.views import format_view, formats_with_view

    read = format_view(str(spec.format), tab)
    if read is None:
        having = formats_with_view(tab)
        raise InvalidInput(
            f"format: table {spec.id} is a {spec.format} table, and its format declares no {tab} view; "
            f"formats with one: {', '.join(having) or 'none'}"
        )
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec

    catalog = store.catalogs.get(spec.catalog)
    out: dict[str, Any] = {"table": spec.id, **read(resolve_catalog_spec(catalog), spec)}
    if tab == "details":
        out["owner"] = spec.owner
        out["managed_by"] = str(reg.managed_by)
        out["catalog"] = {
            "name": catalog.name,
            "type": str(catalog.type.value),
            "warehouse": catalog.warehouse,
            "uri": catalog.properties.get("uri"),
        }
    return out
