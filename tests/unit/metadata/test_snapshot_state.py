"""SnapshotState: telling data commits from file rewrites by walking the kept ancestry."""

from airflow_tablemgmt.metadata.iceberg import SnapshotState

# newest first: 5 replace <- 4 append <- 3 replace <- 2 append <- 1 append
LINEAGE = ((5, "replace"), (4, "append"), (3, "replace"), (2, "append"), (1, "append"))


def test_rewrites_alone_are_not_a_data_change() -> None:
    state = SnapshotState(3, LINEAGE[2:])
    assert state.data_changed_since(2) is False  # only the replace 3 since 2
    assert state.data_changed_since(3) is False  # nothing since


def test_an_append_behind_a_rewrite_is_a_data_change() -> None:
    state = SnapshotState(5, LINEAGE)
    assert state.data_changed_since(3) is True  # 4 appended, then 5 rewrote
    assert state.data_changed_since(4) is False  # only 5 (replace) since 4


def test_unknown_or_missing_since_is_a_change_and_no_snapshot_is_not() -> None:
    state = SnapshotState(5, LINEAGE)
    assert state.data_changed_since(None) is True
    assert state.data_changed_since(999) is True  # expired or never seen: assume changed
    assert SnapshotState(None).data_changed_since(5) is False
    for op in ("overwrite", "delete", None):  # anything but replace changes data
        assert SnapshotState(7, ((7, op), (6, "append"))).data_changed_since(6) is True
