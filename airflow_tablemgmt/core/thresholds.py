"""When a maintenance run pays: per action, the thresholds the gate (``formats/base.py``) and the health score
(``metadata/health.py``) decide with, their defaults, and their validation.

An action's thresholds are part of its settings (``thresholds:`` under the action in YAML, a mapping of
threshold name -> number; ``ActionSettings.thresholds``), in a table's declaration and in a policy's
``actions:`` block alike. A name the action does not know is refused, naming the action, the name and the
allowed ones. A threshold left out takes its default below; a default written as an option name (for
example ``min-input-files``) is that option of the same action, so a table that tunes the job tunes the
gate with it.

An action with an :class:`ActionThresholds` (``Action.thresholds``) is *gated*: before any Spark job starts,
its table's health is read from metadata (no JVM) and the run is skipped, as a recorded process carrying the
figures that decided it, unless a finding of the table names the action. An action without one is not
measured from metadata (orphan files, rows past a TTL, statistics) and runs on its schedule as before.

The defaults and the managed peers' (issue 39)
==============================================

===================  ==========================  ==========  ==============================================
action               threshold                   default     the peers
===================  ==========================  ==========  ==============================================
rewrite-files        min-small-files             the         AWS Glue: > 100 files each under 75 % of the
                                                 action's    target; Amoro minor optimizing: 12 small
                                                 min-input-  files (``self-optimizing.minor.trigger.
                                                 files (5)   file-count``) or 1 hour; Iceberg Flink
                                                             maintenance: a data-file count (no default)
rewrite-files        small-file-fraction         0.75        Glue 75 %; Iceberg's ``min-file-size-bytes``
                                                             is 75 % of the target
rewrite-deletes      min-delete-files            the         Iceberg Flink maintenance: position-delete and
                                                 action's    equality-delete file counts (no default)
                                                 min-input-
                                                 files (5)
rewrite-deletes      min-deleted-row-ratio       0.10        Iceberg ``delete-ratio-threshold`` 0.3; Amoro
                                                             ``major.trigger.duplicate-ratio`` 0.1
rewrite-manifests    min-manifests               10          Iceberg's ``commit.manifest.min-count-to-
                                                             merge`` 100 (merges on commit)
rewrite-manifests    manifests-per-needed        2           (manifests more than 2× what their bytes need
                                                             at 8 MiB, Iceberg's manifest target)
expire-snapshots     min-expirable-snapshots     1           Glue snapshot retention and Amoro expire on an
                                                             interval (daily / hourly), whatever the count
===================  ==========================  ==========  ==============================================

A format measured by its own health hook declares its thresholds with its actions (Delta's ``optimize``:
``min-small-files`` 5); Hudi's hook decides with its actions' own options (``min-delta-commits``,
``retain-commits``, ``max-commits``), so its actions are gated with no threshold of their own.

Pure: no framework import (``core/``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Threshold:
    """One threshold: its name (kebab-case, as written in YAML), default and bounds, and what it means.

    ``default_option``: the default is this option of the action's settings (e.g. ``min-input-files``),
    ``default`` only when the settings lack it."""

    name: str
    default: float
    description: str
    integer: bool = True
    minimum: float = 0.0
    maximum: float | None = None
    default_option: str | None = None

    def check(self, action: str, value: Any) -> float:
        """``value`` as this threshold's number, or ValueError naming the action, the threshold and what
        is allowed."""
        kind = "a whole number" if self.integer else "a number"
        upper = f" and <= {self.maximum:g}" if self.maximum is not None else ""
        allowed = f"{kind} >= {self.minimum:g}{upper}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(
                f"{action}: threshold {self.name}: {value!r} is not a number; allowed: {allowed}"
            )
        number = float(value)
        bad = (
            math.isnan(number)
            or number < self.minimum
            or (self.maximum is not None and number > self.maximum)
            or (self.integer and not number.is_integer())
        )
        if bad:
            raise ValueError(
                f"{action}: threshold {self.name}: {value!r} is out of range; allowed: {allowed}"
            )
        return number


@dataclass(frozen=True)
class ActionThresholds:
    """The thresholds of one action (``Action.thresholds``): the action is gated on its table's health."""

    action: str
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)

    @classmethod
    def of(cls, action: str, *thresholds: Threshold) -> ActionThresholds:
        return cls(action, {t.name: t for t in thresholds})

    def allowed(self) -> str:
        return ", ".join(sorted(self.thresholds)) or "none (this action is gated by its format's own options)"

    def validate(self, values: Mapping[str, Any]) -> dict[str, float]:
        """``values`` checked: every name known to this action, every value in range (ValueError else)."""
        out: dict[str, float] = {}
        for name, value in values.items():
            known = self.thresholds.get(str(name))
            if known is None:
                raise ValueError(f"{self.action}: unknown threshold {name!r}; allowed: {self.allowed()}")
            out[known.name] = known.check(self.action, value)
        return out

    def effective(self, values: Mapping[str, Any] | None, settings: Any = None) -> dict[str, float]:
        """Every threshold's value for a run: the one set, else the action option its default names (read
        from ``settings``, the action's validated settings), else its default. Whole numbers as ints."""
        values = values or {}
        out: dict[str, float] = {}
        for name, t in self.thresholds.items():
            option = t.default_option.replace("-", "_") if t.default_option else None
            found = getattr(settings, option, None) if option and settings is not None else None
            value = values.get(name, found if isinstance(found, int | float) else t.default)
            out[name] = int(value) if t.integer else float(value)
        return out


def refuse_thresholds(action: str | None, values: Mapping[str, Any]) -> None:
    """An action that is not gated takes no thresholds: refuse any, naming the action."""
    if values:
        who = action or "this action"
        raise ValueError(
            f"{who}: unknown threshold {next(iter(values))!r}; allowed: none ({who} has no thresholds: "
            "docs/health.md)"
        )


def validate_thresholds(
    action: str | None, spec: ActionThresholds | None, values: Mapping[str, Any]
) -> dict[str, float]:
    """What ``ActionSettings.thresholds`` holds once validated for ``action`` (``spec``: its thresholds)."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{action or 'this action'}: thresholds must be a mapping of name -> number")
    if spec is None:
        refuse_thresholds(action, values)
        return {}
    return spec.validate(values)


# ---- the built-in figures' actions (metadata/files.py measures them, metadata/health.py decides) ----------

MIN_SMALL_FILES = Threshold(
    "min-small-files",
    5,
    "small data files (under small-file-fraction of the target size) the table must hold before a "
    "compaction pays, besides a compaction removing at least one file (per partition)",
    minimum=1,
    default_option="min-input-files",
)
SMALL_FILE_FRACTION = Threshold(
    "small-file-fraction",
    0.75,
    "a data file under this fraction of the target file size is small",
    integer=False,
    minimum=0.01,
    maximum=1.0,
)
MIN_DELETE_FILES = Threshold(
    "min-delete-files",
    5,
    "position and equality delete files that make a rewrite pay whatever the rows they delete (a v3 "
    "table's deletion vectors count by their rows only: one per data file)",
    minimum=1,
    default_option="min-input-files",
)
MIN_DELETED_ROW_RATIO = Threshold(
    "min-deleted-row-ratio",
    0.10,
    "share of the rows that delete files mark deleted that makes a rewrite pay with fewer delete files",
    integer=False,
    minimum=0.0,
    maximum=1.0,
)
MIN_MANIFESTS = Threshold(
    "min-manifests", 10, "manifests the table must have before a rewrite pays", minimum=1
)
MANIFESTS_PER_NEEDED = Threshold(
    "manifests-per-needed",
    2,
    "a rewrite pays when the manifests are more than this many times what their bytes need at 8 MiB each",
    integer=False,
    minimum=1.0,
)
MIN_EXPIRABLE_SNAPSHOTS = Threshold(
    "min-expirable-snapshots",
    1,
    "snapshots older than older-than beyond retain-last (what the expiry drops) before an expiry pays",
    minimum=1,
)

REWRITE_FILES = ActionThresholds.of("rewrite-files", MIN_SMALL_FILES, SMALL_FILE_FRACTION)
REWRITE_DELETES = ActionThresholds.of("rewrite-deletes", MIN_DELETE_FILES, MIN_DELETED_ROW_RATIO)
REWRITE_MANIFESTS = ActionThresholds.of("rewrite-manifests", MIN_MANIFESTS, MANIFESTS_PER_NEEDED)
EXPIRE_SNAPSHOTS = ActionThresholds.of("expire-snapshots", MIN_EXPIRABLE_SNAPSHOTS)

#: The thresholds of the actions the built-in file figures (``metadata/files.py``) measure, by action.
FILE_FIGURE_ACTIONS: dict[str, ActionThresholds] = {
    t.action: t for t in (REWRITE_FILES, REWRITE_DELETES, REWRITE_MANIFESTS, EXPIRE_SNAPSHOTS)
}

__all__ = [
    "FILE_FIGURE_ACTIONS",
    "ActionThresholds",
    "Threshold",
    "refuse_thresholds",
    "validate_thresholds",
]
