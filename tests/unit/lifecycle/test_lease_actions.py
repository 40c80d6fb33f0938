"""Which actions take the table's lease (issue 23, item 4): every action whose job commits to the
table's metadata. compute-stats commits too (``compute_table_stats`` registers its Puffin file with
``UpdateStatistics``, a new metadata file), so it is refused while another job holds the table."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.lifecycle import RunRequest
from airflow_tablemgmt.store import Store
from tests.support.threads import in_thread
from tests.unit.lifecycle.stand_ins import StandInSubmitter, instant, make_store, runner

TABLE = "lake.sales.orders"


#: The Iceberg actions: each commits to the table's metadata (a snapshot, or for compute-stats a
#: statistics file registered by a metadata commit) or, for delete-orphans, deletes the table's files.
COMMITTING = (
    "rewrite-files",
    "rewrite-deletes",
    "rewrite-manifests",
    "expire-snapshots",
    "delete-orphans",
    "expire-data",
    "compute-stats",
    "refresh",
)


def test_every_action_that_commits_takes_the_lease() -> None:
    assert [name for name in COMMITTING if not ACTIONS.get(name).mutates] == []


@pytest.mark.parametrize(
    ("holding", "waiting"), [("rewrite-files", "compute-stats"), ("compute-stats", "rewrite-files")]
)
def test_compute_stats_and_rewrite_files_are_refused_while_the_other_holds_the_table(
    tmp_path: Path, holding: str, waiting: str
) -> None:
    store: Store = make_store(tmp_path)
    spec = TableSpec.model_validate(
        {
            "catalog": "lake",
            "namespace": "sales",
            "name": "orders",
            "actions": {"rewrite-files": {}, "compute-stats": {}},
        }
    )
    store.tables.upsert(spec, Owner.STORE)
    hold = threading.Event()
    first = StandInSubmitter(hold=hold)
    t, out = in_thread(lambda: runner(store, first, tmp_path).run(RunRequest(TABLE, holding, instant(1))))
    try:
        assert first.submitting.wait(10)
        second = StandInSubmitter()
        with pytest.raises(LeaseUnavailable):
            runner(store, second, tmp_path).run(RunRequest(TABLE, waiting, instant(1)))
        assert second.jobs == []
    finally:
        hold.set()
        t.join(10)
    assert out and not isinstance(out[0], BaseException), out
    done = runner(store, second, tmp_path).run(RunRequest(TABLE, waiting, instant(1)))
    assert len(second.jobs) == 1 and done.process.status == "SUCCESS"
