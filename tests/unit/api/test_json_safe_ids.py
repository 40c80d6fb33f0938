"""A process answered by the REST API carries every integer beyond 2^53 (Iceberg snapshot ids inside
``summary``) as a string, so JavaScript and jq read the id that was stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from airflow_tablemgmt.api.views import process_out
from airflow_tablemgmt.core.process import Process, ProcessStatus

BIG = 6_432_511_086_226_845_123  # a real-looking Iceberg snapshot id, > 2^53


def test_big_integers_in_summary_are_strings_and_small_ones_stay_numbers() -> None:
    p = Process(
        id=1,
        table_id="c.n.t",
        action="expire-snapshots",
        instant=datetime(2026, 1, 1, tzinfo=UTC),
        status=ProcessStatus.SUCCESS,
        snapshot_id=BIG,
        parameters={"snapshot_ids": [BIG]},
        summary={"after": {"current_snapshot_id": BIG, "data_files": 3, "ok": True}, "expired": [BIG, -BIG]},
    )
    out = json.loads(process_out(p).model_dump_json())
    assert out["snapshot_id"] == str(BIG)
    assert out["summary"]["after"] == {"current_snapshot_id": str(BIG), "data_files": 3, "ok": True}
    assert out["summary"]["expired"] == [str(BIG), str(-BIG)]
    assert out["parameters"] == {"snapshot_ids": [str(BIG)]}
    assert p.summary["after"]["current_snapshot_id"] == BIG  # the stored process is unchanged
