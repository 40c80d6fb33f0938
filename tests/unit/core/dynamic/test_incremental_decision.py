"""core/dynamic/incremental_decision.py and delta_terms.py: whether one refresh is incremental and why, and
which version of each source occurrence the change is computed from (pure; real Spark + Iceberg in
tests/integration/spark/test_incremental_property.py)."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.dynamic.delta_terms import (
    AT,
    CHANGE,
    DELETED,
    INSERTED,
    JOIN_WITH_UNION,
    NONE,
    Read,
    pinned,
    removals,
    terms,
)
from airflow_tablemgmt.core.dynamic.incremental import FULL, INCREMENTAL, Analysis
from airflow_tablemgmt.core.dynamic.incremental_decision import (
    NO_PREVIOUS,
    NO_STATE,
    NO_TABLE_SNAPSHOT,
    NOTHING_CHANGED,
    STATE_OK,
    STATE_REBUILD,
    STATE_ROLLBACK,
    Previous,
    carried_over,
    decide,
    previous_of,
    state_layout_problem,
    state_repair,
    table_problem,
)
from airflow_tablemgmt.core.dynamic.source_changes import SnapshotInfo, SourceChange, classify

A, B = "lake.db.a", "lake.db.b"
CAN = Analysis(True, "GROUP BY day with avg of lake.db.a: …", strategy="MERGE_BY_KEY", sources=(A,))


def appended(table: str, since: int, now: int) -> SourceChange:
    return classify(table, since, now, [SnapshotInfo(now, "append", (), 2)], reached_since=True)


def unchanged(table: str, at: int) -> SourceChange:
    return classify(table, at, at, [], reached_since=True)


def deleted(table: str, since: int, now: int) -> SourceChange:
    """A copy-on-write delete (no delete files): read from Iceberg's changelog."""
    return classify(table, since, now, [SnapshotInfo(now, "delete", delete_files=0)], reached_since=True)


def deleted_merge_on_read(table: str, since: int, now: int) -> SourceChange:
    return classify(table, since, now, [SnapshotInfo(now, "delete", delete_files=2)], reached_since=True)


PREVIOUS = Previous({A: 1, B: 5}, snapshot_id=10, state_snapshot_id=20, process_id=3)


def test_appends_are_incremental_and_the_reason_says_what_was_read() -> None:
    mode = decide("AUTO", CAN, PREVIOUS, {A: appended(A, 1, 2), B: unchanged(B, 5)})
    assert mode.mode == INCREMENTAL
    assert mode.reason.startswith("MERGE_BY_KEY: lake.db.a: 1 append snapshot(s) since 1: 2 new rows")
    nothing = decide("INCREMENTAL", CAN, PREVIOUS, {A: unchanged(A, 1), B: unchanged(B, 5)})
    assert (nothing.mode, nothing.reason) == (INCREMENTAL, NOTHING_CHANGED)


@pytest.mark.parametrize(
    ("declared", "analysis", "previous", "changes", "kw", "reason"),
    [
        ("FULL", CAN, PREVIOUS, {}, {}, "refresh-mode is FULL"),
        (
            "AUTO",
            Analysis(False, "it uses a window function (rank)", construct="a window function (rank)"),
            PREVIOUS,
            {},
            {},
            "the query cannot be maintained incrementally: it uses a window function (rank)",
        ),
        ("AUTO", CAN, None, {}, {}, NO_PREVIOUS),
        ("AUTO", CAN, PREVIOUS, {A: appended(A, 1, 2)}, {}, "the query's sources are not those the last"),
        ("AUTO", CAN, PREVIOUS, {A: appended(A, 1, 2), B: unchanged(B, 5)}, {"table_problem": "x"}, "x"),
        (
            "INCREMENTAL",  # declared INCREMENTAL still refreshes in full when the change cannot be read
            CAN,
            PREVIOUS,
            {A: deleted_merge_on_read(A, 1, 2), B: unchanged(B, 5)},
            {},
            "lake.db.a: snapshot 2 is a delete (removed rows) of a table with delete files (2, merge-on-read)",
        ),
        (
            "AUTO",  # the changelog gives the removed rows, but a min / max cannot subtract them
            CAN,
            PREVIOUS,
            {A: deleted(A, 1, 2), B: unchanged(B, 5)},
            {"removal_problem": "min / max (lo) cannot subtract removed rows"},
            "lake.db.a: 0 append and 1 delete snapshot(s) since 1 (copy-on-write), read from Iceberg's changelog",
        ),
        (
            "AUTO",
            CAN,
            PREVIOUS,
            {A: appended(A, 1, 2), B: unchanged(B, 5)},
            {"state_problem": NO_STATE},
            NO_STATE,
        ),
    ],
)
def test_full_and_why_in_order(
    declared: str, analysis: Analysis, previous: Previous | None, changes: dict, kw: dict, reason: str
) -> None:
    mode = decide(declared, analysis, previous, changes, **kw)
    assert mode.mode == FULL and mode.reason.startswith(reason), mode


def test_a_copy_on_write_delete_is_incremental_unless_the_query_cannot_subtract_it() -> None:
    changes = {A: deleted(A, 1, 2), B: appended(B, 5, 6)}
    mode = decide("AUTO", CAN, PREVIOUS, changes)
    assert mode.mode == INCREMENTAL
    assert mode.reason.startswith("MERGE_BY_KEY: lake.db.a: 0 append and 1 delete snapshot(s) since 1"), mode
    assert "lake.db.b: 1 append snapshot(s) since 5" in mode.reason
    full = decide(
        "AUTO", CAN, PREVIOUS, changes, removal_problem="min / max (lo) cannot subtract removed rows"
    )
    assert full.mode == FULL
    assert full.reason.endswith(
        "; the query's min / max (lo) cannot subtract removed rows: refreshed in full"
    )
    # Appends alone never ask whether removals could be subtracted.
    only = decide("AUTO", CAN, PREVIOUS, {A: appended(A, 1, 2), B: unchanged(B, 5)}, removal_problem="x")
    assert only.mode == INCREMENTAL


def test_the_table_must_be_as_the_last_refresh_left_it() -> None:
    t = "lake.db.dt"
    assert table_problem(t, 10, 10, [], reached=True) is None
    assert table_problem(t, 10, 12, [(12, "replace"), (11, "replace")], reached=True) is None  # compactions
    assert table_problem(t, None, 12, [], reached=False) == NO_TABLE_SNAPSHOT
    # A refresh whose commit landed but was never recorded: adding the change again would count it twice.
    twice = table_problem(t, 10, 12, [(12, "replace"), (11, "append")], reached=True)
    assert twice is not None and "snapshot 11, a append" in twice and "twice" in twice
    gone = table_problem(t, 10, 12, [(12, "overwrite")], reached=False)
    assert gone is not None and "no longer in the table's history" in gone


def test_a_state_table_ahead_of_the_record_is_rolled_back_else_rebuilt() -> None:
    s = "lake.db.dt__tms_state"
    assert state_repair(s, 20, 20, recorded_is_ancestor=True) == (STATE_OK, "")
    action, why = state_repair(s, 20, 21, recorded_is_ancestor=True)
    assert action == STATE_ROLLBACK and "rolled back to 20" in why
    assert state_repair(s, 20, 21, recorded_is_ancestor=False)[0] == STATE_REBUILD
    assert state_repair(s, None, 21, recorded_is_ancestor=False) == (STATE_REBUILD, NO_STATE)
    assert state_repair(s, 20, None, recorded_is_ancestor=False)[0] == STATE_REBUILD


def test_a_state_table_of_another_layout_is_rebuilt_naming_why() -> None:
    expected = "2;slots=count:bigint,avg:double;keys=string;partitioned=k0"
    assert state_layout_problem("lake.db.t__tms_state", expected, expected) is None
    older = state_layout_problem("lake.db.t__tms_state", None, expected)
    assert older is not None and older.startswith("no previous state: the state table lake.db.t__tms_state")
    assert "earlier version" in older
    other = state_layout_problem(
        "lake.db.t__tms_state", "2;slots=avg:double;keys=string;partitioned=", expected
    )
    assert other is not None and "another query or partitioning" in other and expected in other
    # a state of the same query written by an earlier layout (3: one row per group, rewritten whole) is
    # rebuilt once, saying so: layout 4 reads a group's rows as a log of partials
    current = "4;slots=count:bigint,avg:double;keys=string;partitioned="
    layout_3 = state_layout_problem("lake.db.t__tms_state", "3" + current[1:], current)
    assert layout_3 == (
        "no previous state: the state table lake.db.t__tms_state was written by an earlier version "
        "(state layout 3, now 4): rebuilt in layout 4"
    )
    # decide puts it where a missing state goes: after the sources' changes
    mode = decide("AUTO", CAN, Previous({A: 1}, 10, 20), {A: appended(A, 1, 2)}, state_problem=older)
    assert (mode.mode, mode.reason) == (FULL, older)


def test_previous_from_the_summaries() -> None:
    full = {
        "incremental_base": True,
        "source_snapshots": {A: "1"},
        "snapshot_id": 10,
        "state_snapshot_id": None,
    }
    assert previous_of(full, 3) == {
        "source_snapshots": {A: 1},
        "snapshot_id": 10,
        "state_snapshot_id": None,
        "process_id": 3,
    }
    # A partition refresh (or one before this version) leaves no base to add a change to.
    assert previous_of({**full, "incremental_base": False}, 3) is None
    assert previous_of({"source_snapshots": {A: 1}}, 3) is None
    assert previous_of(None, 3) is None
    assert carried_over(full) == {"incremental_base": True, "snapshot_id": 10, "state_snapshot_id": None}
    assert carried_over({"refresh_action": "FULL"}) == {}
    assert Previous.from_dict(previous_of(full, 3)) == Previous({A: 1}, 10, None, 3)


def test_without_a_join_one_term_reads_the_changed_sources_delta_and_nothing_else() -> None:
    changes = {A: appended(A, 1, 2), B: unchanged(B, 5)}
    # SELECT … FROM a UNION ALL SELECT … FROM b UNION ALL SELECT … FROM a
    assert terms([A, B, A], changes, joined=False, unioned=True) == [
        [Read(CHANGE, since=1, until=2), Read(NONE), Read(CHANGE, since=1, until=2)]
    ]
    assert terms([A, B], {A: unchanged(A, 1), B: unchanged(B, 5)}, joined=True, unioned=False) == []


def test_a_join_of_two_changed_sides_is_the_union_of_both_deltas() -> None:
    changes = {A: appended(A, 1, 2), B: appended(B, 5, 6)}
    # ΔA ⋈ B_old  +  A_new ⋈ ΔB  (= A_new ⋈ B_new - A_old ⋈ B_old)
    assert terms([A, B], changes, joined=True, unioned=False) == [
        [Read(CHANGE, since=1, until=2), Read(AT, 5)],
        [Read(AT, 2), Read(CHANGE, since=5, until=6)],
    ]
    # One side changed: its delta joined with the other side at its (unchanged) snapshot.
    one = {A: appended(A, 1, 2), B: unchanged(B, 5)}
    assert terms([A, B], one, joined=True, unioned=False) == [[Read(CHANGE, since=1, until=2), Read(AT, 5)]]
    # A self-join: one term per occurrence.
    assert terms([A, A], {A: appended(A, 1, 2)}, joined=True, unioned=False) == [
        [Read(CHANGE, since=1, until=2), Read(AT, 1)],
        [Read(AT, 2), Read(CHANGE, since=1, until=2)],
    ]
    assert terms([A, B], changes, joined=True, unioned=True) == JOIN_WITH_UNION


def test_removed_rows_are_the_same_terms_over_the_changelog_deletes() -> None:
    # SELECT … FROM a UNION ALL SELECT … FROM b: a deleted (changelog), b appended.
    changes = {A: deleted(A, 1, 2), B: appended(B, 5, 6)}
    added = terms([A, B], changes, joined=False, unioned=True)
    assert added == [[Read(INSERTED, since=1, until=2), Read(CHANGE, since=5, until=6)]]
    assert removals(added) == [[Read(DELETED, since=1, until=2), Read(NONE)]]
    # A ⋈ B: (A⁺ − A⁻) ⋈ B_old + A_new ⋈ ΔB; the appended side's term removes nothing.
    added = terms([A, B], changes, joined=True, unioned=False)
    assert added == [
        [Read(INSERTED, since=1, until=2), Read(AT, 5)],
        [Read(AT, 2), Read(CHANGE, since=5, until=6)],
    ]
    assert removals(added) == [[Read(DELETED, since=1, until=2), Read(AT, 5)]]
    assert removals(terms([A], {A: appended(A, 1, 2)}, joined=False, unioned=False)) == []


def test_a_full_refresh_reads_each_source_at_the_snapshot_it_records() -> None:
    assert pinned([A, B, A], {A: 2, B: None}) == [Read(AT, 2), Read(AT, None), Read(AT, 2)]
