"""The planning step of a policy's (policy, action) DAG (ADR 0004): from the policy's enrolled tables, each
table's stored health and the action's effective thresholds, which tables the action pays on, which must be
measured first, and the batches the pay-worthy ones run in. Pure: plain rows in, a :class:`Plan` out; the
store's one query is ``store/planning.py``'s, the wiring ``services/planning.py``'s.

The decision is the gate's own (:func:`~airflow_tablemgmt.metadata.health.decide`), on the stored figures
with **the action's thresholds as the table's settings say now** (``Action.thresholds.effective``, as the
health read computes them, ``metadata/files.py``): a threshold changed since the table was measured
(``min-small-files``, ``min-manifests`` ...) is applied without reading the table again. A setting the
figures were *measured with* (rewrite-files' ``target-file-size-bytes``, ``min-input-files`` and
``small-file-fraction``; expire-snapshots' ``older-than``) changes the figures themselves, so a table
measured with other values is measured again first, as is a table with no health or health older than the
bound. A format's own health (its hook's findings, ``FormatHealth``) was decided when it was read: it is
taken as stored. The gate still reads each table again right before its job starts, so a plan from stored
health never starts a job on a table that stopped needing it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.formats import FORMATS
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.metadata.health import FormatHealth, decide

#: Tables per mapped task (``[tablemgmt] plan_batch_size``): each batch runs its tables one after another on
#: one warm engine (ADR 0004).
DEFAULT_BATCH_SIZE = 50
#: Stored health older than this is measured again before the table is planned
#: (``[tablemgmt] plan_health_max_age``).
DEFAULT_HEALTH_MAX_AGE = timedelta(days=1)


class Row(Protocol):
    """What :func:`plan` reads of a row (``store/planning.py``'s ``EnrolledHealth``, or a :class:`PlanRow`)."""

    @property
    def table_id(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def actions(self) -> Mapping[str, Any]: ...
    @property
    def figures(self) -> Mapping[str, Any] | None: ...
    @property
    def measured_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class PlanRow:
    """One enrolled table as the store holds it: its format, its ``actions`` block (the policies'
    effective settings, as discovery wrote them), and its last health measurement, if any."""

    table_id: str
    format: str
    actions: Mapping[str, Any]
    figures: Mapping[str, Any] | None = None  # tms_table_health.figures
    measured_at: datetime | None = None


@dataclass(frozen=True)
class Planned:
    """A table the action pays on: its score and why (the decision's reason)."""

    table_id: str
    score: int
    reason: str


@dataclass
class Plan:
    """What one planning pass decided for one action. ``pays``: worst score first (then by table id);
    ``measure``: table id -> why it must be measured before it can be planned; ``idle``: table id -> why
    the action does not pay now (the gate's reason); ``not_enabled``: enrolled tables whose settings do not
    enable the action (or whose format lacks it, or whose settings no longer validate: id -> why)."""

    action: str
    pays: list[Planned] = field(default_factory=list)
    measure: dict[str, str] = field(default_factory=dict)
    idle: dict[str, str] = field(default_factory=dict)
    not_enabled: dict[str, str] = field(default_factory=dict)
    batch_size: int = DEFAULT_BATCH_SIZE

    @property
    def batches(self) -> list[list[str]]:
        """The pay-worthy tables' ids in batches of ``batch_size``."""
        return batches([p.table_id for p in self.pays], self.batch_size)

    def counts(self) -> dict[str, int]:
        return {
            "pays": len(self.pays),
            "measure": len(self.measure),
            "idle": len(self.idle),
            "not_enabled": len(self.not_enabled),
            "batches": -(-len(self.pays) // self.batch_size),
        }


def batches(table_ids: Sequence[str], size: int) -> list[list[str]]:
    """``table_ids`` cut into lists of at most ``size``, in order."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"plan_batch_size: {size!r} is not allowed; allowed: a whole number >= 1")
    return [list(table_ids[i : i + size]) for i in range(0, len(table_ids), size)]


@dataclass(frozen=True)
class _Terms:
    """What one distinct (format, action settings) means for the plan: enabled or why not, the effective
    thresholds (None: the action is not gated), and the settings the figures must have been measured with."""

    why_not: str | None
    thresholds: dict[str, float] | None = None
    basis: tuple[tuple[str, float], ...] = ()


def _terms(format: str, action: str, raw: Any) -> _Terms:
    if raw is None:
        return _Terms(f"its settings do not name {action}")
    fmt = FORMATS.find(format)
    act = fmt.action(action) if fmt is not None else None
    if act is None:
        return _Terms(f"its format {format} has no {action}")
    try:
        settings = act.settings(raw)
    except (TableMgmtError, ValueError) as e:
        return _Terms(f"its {action} settings are not valid: {e}")
    if not settings.enabled:
        return _Terms(f"{action} is not enabled")
    if act.thresholds is None:
        return _Terms(None)
    thresholds = act.thresholds.effective(settings.thresholds, settings)
    return _Terms(None, thresholds, _basis(action, settings, thresholds))


def _basis(action: str, settings: Any, thresholds: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """The FileStats fields the figures must hold for ``action``'s decision to stand (measured with these)."""
    if action == "rewrite-files":
        out = [
            ("target_file_size_bytes", getattr(settings, "target_file_size_bytes", None)),
            ("min_input_files", getattr(settings, "min_input_files", None)),
            ("small-file-fraction", thresholds.get("small-file-fraction")),
        ]
    elif action == "expire-snapshots":
        older = getattr(settings, "older_than", None)
        out = [("snapshot_max_age_s", older.total_seconds() if older is not None else None)]
    else:
        return ()
    return tuple((k, float(v)) for k, v in out if v is not None)


def _measured_with(stats: FileStats, action: str, key: str) -> float | None:
    if key == "small-file-fraction":
        value = ((stats.thresholds or {}).get(action) or {}).get(key)
    else:
        value = getattr(stats, key, None)
    return None if value is None else float(value)


def _num(x: float) -> str:
    return str(int(x)) if x.is_integer() else f"{x:g}"


def reading_of(document: Mapping[str, Any]) -> FileStats | FormatHealth:
    """What a stored health row's figures document holds: a format's health, or the file figures (fields
    it lacks take their defaults)."""
    if "format_health" in document:
        return FormatHealth.from_dict(document["format_health"])
    known = FileStats.__dataclass_fields__
    return FileStats(**{k: v for k, v in document.items() if k in known})


def plan(
    rows: Iterable[Row],
    action: str,
    *,
    now: datetime,
    max_age: timedelta = DEFAULT_HEALTH_MAX_AGE,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> Plan:
    """Decide ``action`` for every row (see the module docstring). ``now``: the database's time, which the
    rows' ``measured_at`` were stamped with."""
    batches([], batch_size)  # the size checked before any work
    out = Plan(action, batch_size=batch_size)
    memo: dict[tuple[str, str], _Terms] = {}
    for row in rows:
        raw = row.actions.get(action)
        key = (row.format, json.dumps(raw, sort_keys=True, default=str))
        terms = memo.get(key)
        if terms is None:
            terms = memo[key] = _terms(row.format, action, raw)
        if terms.why_not is not None:
            out.not_enabled[row.table_id] = terms.why_not
            continue
        if terms.thresholds is None:  # not gated: it runs on its schedule, whatever the health
            out.pays.append(Planned(row.table_id, 100, f"{action} is not measured from metadata"))
            continue
        if row.figures is None or row.measured_at is None:
            out.measure[row.table_id] = "no health measured"
            continue
        age = now - row.measured_at
        if age > max_age:
            out.measure[row.table_id] = (
                f"health measured {age.total_seconds() / 3600:.1f} h ago (bound {max_age.total_seconds() / 3600:g} h)"
            )
            continue
        try:
            reading = reading_of(row.figures)
        except (TypeError, ValueError, KeyError) as e:
            out.measure[row.table_id] = f"stored health unreadable: {e}"
            continue
        if isinstance(reading, FileStats):
            changed = [
                f"{k} {_num(m)} (now {_num(v)})"
                for k, v in terms.basis
                if (m := _measured_with(reading, action, k)) is not None and m != v
            ]
            if changed:
                out.measure[row.table_id] = "measured with other settings: " + ", ".join(changed)
                continue
            reading = replace(reading, thresholds={**(reading.thresholds or {}), action: terms.thresholds})
        decision = decide(reading, action)
        if decision.pays:
            out.pays.append(Planned(row.table_id, decision.score, decision.reason))
        else:
            out.idle[row.table_id] = decision.reason
    out.pays.sort(key=lambda p: (p.score, p.table_id))
    return out


__all__ = ["DEFAULT_BATCH_SIZE", "DEFAULT_HEALTH_MAX_AGE", "Plan", "PlanRow", "Planned", "batches", "plan"]
