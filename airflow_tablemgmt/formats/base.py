"""What every format's factory shares, derived from its :class:`~airflow_tablemgmt.core.formats.Format`.

A format's factory subclasses :class:`FormatFactory`, names its format, and writes only what differs:

* :meth:`FormatFactory.refusal`: why an action is declined before any JVM (a path-based table's location is
  checked by default);
* :meth:`FormatFactory.plan`: the run's options, or None when there is nothing to do (a threshold read
  from the table's own metadata);
* :meth:`FormatFactory.health_gate`: whether the run pays, decided on the table's health read from metadata
  (no JVM) with the action's thresholds (``core/thresholds.py``, ``metadata/health.py``): a run that does
  not pay is a skipped process whose summary carries the figures that decided it. Every format gets it.
* :meth:`FormatFactory.resume`: the options of a retry (an instant the dead attempt chose).

``supported_actions``, ``trigger_strategy``, ``trigger``, ``recover`` and the job spec itself (the table's
format on its catalog, a path-based table's location in its options) come from the descriptor.
"""

from __future__ import annotations

import logging
import os
from functools import cached_property
from typing import Any, ClassVar

from airflow_tablemgmt.core.errors import ActionNotSupported, RecoverProcessFailed
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext, declined
from airflow_tablemgmt.core.formats import (
    DEFAULT_FORMAT,
    FORMATS,
    TABLE_FORMAT_PROPERTY,
    TABLE_LOCATION_OPTION,
    Format,
)
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.triggers import TriggerStrategy

log = logging.getLogger(__name__)

#: ``0`` in a worker's environment: no run is gated on its table's health (every run as before the gate).
HEALTH_GATE_ENV = "TABLEMGMT_HEALTH_GATE"


class FormatFactory:
    """A ``ProcessFactory`` over one format's descriptor (set :attr:`format` in the subclass)."""

    #: The format's name, as its ``Format`` declares it.
    format: ClassVar[str]

    @property
    def name(self) -> str:
        return self.format

    @cached_property
    def descriptor(self) -> Format:
        return FORMATS.get(self.format)

    def supported_actions(self) -> dict[str, set[str]]:
        return {self.format: set(self.descriptor.strategies)}

    def trigger_strategy(self, format: str, action: str) -> TriggerStrategy:
        strategies = self.descriptor.strategies
        if str(format) != self.format or action not in strategies:
            raise ActionNotSupported(
                f"the {self.format} factory does not support {format}/{action}; supported: "
                f"{', '.join(sorted(strategies))}"
            )
        return strategies[action]

    def trigger(
        self, table: TableSpec, action: str, context: TriggerContext
    ) -> JobSpec | dict[str, Any] | None:
        self.trigger_strategy(str(table.format), action)
        refused = self.refusal(table, action, context)
        if refused is not None:
            log.warning("tablemgmt: %s", refused)
            return declined(refused)
        options = self.plan(table, action, table.action_settings(action).options(), context)
        if options is None:
            return None
        skipped = self.health_gate(table, action, context) if self.gated(action, options) else None
        return skipped if skipped is not None else self.job(table, action, options, context)

    def recover(self, table: TableSpec, process: Process, context: TriggerContext) -> JobSpec:
        if process.action not in self.descriptor.strategies:
            raise RecoverProcessFailed(
                f"process {process.id}: action {process.action!r} is not a {self.format} action"
            )
        options = self.resume(table, process, table.action_settings(process.action).options(), context)
        return self.job(table, process.action, options, context)

    # -- what a format may change ------------------------------------------------------------------

    def refusal(self, table: TableSpec, action: str, context: TriggerContext) -> str | None:
        """Why ``action`` is declined on ``table`` before any job (a skipped process naming it), or None.
        Default: a path-based table whose location is missing or holds no table of this format."""
        if not self.descriptor.path_based:
            return None
        from airflow_tablemgmt.factories.path_formats import location_refusal

        return location_refusal(table, action, context)

    def plan(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any] | None:
        """The options of this run's job, or None when there is nothing to do (the task ends skipped)."""
        return options

    def gated(self, action: str, options: dict[str, Any]) -> bool:
        """Whether this run of ``action`` waits for its table's health to say it pays. Default: every run but
        one that asks for every file (``rewrite-all: true``); a format excepts runs its findings do not
        measure (Delta's Z-order OPTIMIZE)."""
        return not options.get("rewrite-all")

    def health_gate(self, table: TableSpec, action: str, context: TriggerContext) -> dict[str, Any] | None:
        """The summary of a run skipped because it does not pay (``metadata.health.Decision.summary``:
        ``declined`` with the reason and the figures and thresholds that decided it), or None to run.

        Only an action that declares thresholds (``Action.thresholds``) is gated; a recovery is not (it
        finishes a run that was decided already). The table's health is read from its metadata with the
        format's health hook, no JVM; a table whose health cannot be read here runs (the job decides, as
        before), and so does every run with ``TABLEMGMT_HEALTH_GATE=0`` in the worker's environment."""
        spec = self.descriptor.action(action)
        if spec is None or spec.thresholds is None or os.environ.get(HEALTH_GATE_ENV, "1") == "0":
            return None
        from airflow_tablemgmt.factories.health import read_health
        from airflow_tablemgmt.metadata.health import decide

        catalog = context.resolve_catalog(context.catalog) if context.resolve_catalog else context.catalog
        try:
            reading = read_health(catalog, table)
        except Exception as e:  # noqa: BLE001 - an unreadable health never stops maintenance: the job decides
            log.warning("tablemgmt: %s: health not readable before %s (%s); running it", table.id, action, e)
            return None
        decision = decide(reading, action)
        if decision.pays:
            log.info("tablemgmt: %s pays on %s: %s", action, table.id, decision.reason)
            return None
        log.info("tablemgmt: %s on %s skipped, it does not pay: %s", action, table.id, decision.reason)
        return decision.summary()

    def resume(
        self, table: TableSpec, process: Process, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any]:
        """The options of the job that finishes the interrupted ``process`` (raise
        ``RecoverProcessFailed`` to abandon it). Default: the same job again (every action idempotent)."""
        return options

    def job(self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext) -> JobSpec:
        """The job spec: the catalog marked with the table's format (unless it is the default), a
        path-based table's location in the options (the maintainer takes it out)."""
        return format_job(self.descriptor, table, action, options, context)


def format_job(
    fmt: Format, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
) -> JobSpec:
    """The job of ``action`` on ``table`` of format ``fmt`` (see :meth:`FormatFactory.job`)."""
    catalog = context.catalog
    if fmt.name != DEFAULT_FORMAT:
        properties = {**catalog.properties, TABLE_FORMAT_PROPERTY: fmt.name}
        catalog = catalog.model_copy(update={"properties": properties})
    if fmt.path_based and TABLE_LOCATION_OPTION not in options:
        from airflow_tablemgmt.metadata.table_paths import table_location

        options = {**options, TABLE_LOCATION_OPTION: table_location(context.catalog, table.identifier)}
    return JobSpec.build(table, catalog, action, options)


__all__ = ["HEALTH_GATE_ENV", "FormatFactory", "format_job"]
