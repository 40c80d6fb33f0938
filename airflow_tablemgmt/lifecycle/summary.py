"""A finished job's summary: the factory's completion of it, the snapshot it made, one log line."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.core.factory import ProcessFactory, StoreAwareFactory
from airflow_tablemgmt.core.process import Process


def complete_summary(
    factory: ProcessFactory,
    process: Process,
    summary: dict[str, Any],
    application_id: str | None,
    duration: float | None,
) -> dict[str, Any]:
    if not isinstance(factory, StoreAwareFactory):
        return summary
    return dict(
        factory.complete_summary(process, summary, application_id=application_id, duration_seconds=duration)
    )


def snapshot_after(summary: dict[str, Any]) -> int | None:
    after = summary.get("after") if isinstance(summary.get("after"), dict) else None
    for source in (after or {}, summary):
        for key in ("current_snapshot_id", "snapshot_id_after", "snapshot_id"):
            v = source.get(key)
            if isinstance(v, int):
                return v
    return None


def one_line(summary: dict[str, Any]) -> str:
    before, after = summary.get("before") or {}, summary.get("after") or {}
    if isinstance(before, dict) and isinstance(after, dict) and "data_files" in before:
        line = (
            f"data files {before.get('data_files')} -> {after.get('data_files')}, "
            f"live records {before.get('live_records')} -> {after.get('live_records')}, "
            f"physical rows {before.get('physical_rows')} -> {after.get('physical_rows')}"
        )
        if summary.get("dry_run") and "would_delete_rows" in summary:
            line = f"DRY RUN ({summary.get('dry_run_reason')}): would delete {summary['would_delete_rows']} rows; {line}"
        return line
    return ", ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, dict | list))[:500]
