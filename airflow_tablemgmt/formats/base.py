"""What every format's factory shares, derived from its :class:`~airflow_tablemgmt.core.formats.Format`.

A format's factory subclasses :class:`FormatFactory`, names its format, and writes only what differs:

* :meth:`FormatFactory.refusal`: why an action is declined before any JVM (a path-based table's location is
  checked by default);
* :meth:`FormatFactory.plan`: the run's options, or None when there is nothing to do (a threshold read
  from the table's own metadata);
* :meth:`FormatFactory.resume`: the options of a retry (an instant the dead attempt chose).

``supported_actions``, ``trigger_strategy``, ``trigger``, ``recover`` and the job spec itself (the table's
format on its catalog, a path-based table's location in its options) come from the descriptor.
"""

from __future__ import annotations

import logging
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
        return None if options is None else self.job(table, action, options, context)

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


__all__ = ["FormatFactory", "format_job"]
