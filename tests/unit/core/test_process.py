import pytest

from airflow_tablemgmt.core.errors import IllegalTransition
from airflow_tablemgmt.core.process import LEGAL_TRANSITIONS, ProcessStatus, can_transition, check_transition

S = ProcessStatus


def test_happy_path_is_legal() -> None:
    for a, b in [
        (S.PENDING, S.SUBMITTED),
        (S.SUBMITTED, S.RUNNING),
        (S.RUNNING, S.SUCCESS),
        (S.RUNNING, S.FAILED),
        (S.RUNNING, S.KILLED),
        (S.RUNNING, S.CANCELING),
        (S.CANCELING, S.CANCELED),
        (S.FAILED, S.PENDING),
    ]:
        check_transition(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [(S.SUCCESS, S.RUNNING), (S.SUCCESS, S.PENDING), (S.PENDING, S.SUCCESS), (S.CANCELED, S.RUNNING)],
)
def test_illegal_transitions_raise_with_allowed(a: ProcessStatus, b: ProcessStatus) -> None:
    with pytest.raises(IllegalTransition, match=f"from {a} to {b}"):
        check_transition(a, b)


def test_every_status_has_rules_and_success_is_final() -> None:
    assert set(LEGAL_TRANSITIONS) == set(S)
    assert not any(can_transition(S.SUCCESS, s) for s in S)
