"""An action's thresholds (core/thresholds.py, ``ActionSettings.thresholds``): validated per action, an unknown
name refused naming the action, the name and the allowed ones; defaults from the action's own options."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.thresholds import FILE_FIGURE_ACTIONS, REWRITE_FILES


def _table(actions: dict[str, object]) -> TableSpec:
    return TableSpec.model_validate({"catalog": "c", "namespace": "n", "name": "t", "actions": actions})


def test_thresholds_are_kept_and_stay_out_of_the_jobs_options() -> None:
    spec = _table({"rewrite-files": {"thresholds": {"min-small-files": 100, "small-file-fraction": 0.5}}})
    settings = spec.action_settings("rewrite-files")
    assert settings.thresholds == {"min-small-files": 100, "small-file-fraction": 0.5}
    assert "thresholds" not in settings.options()
    assert spec.actions["rewrite-files"] == {
        "thresholds": {"min-small-files": 100, "small-file-fraction": 0.5}
    }


def test_an_unknown_threshold_names_the_action_the_name_and_the_allowed_ones() -> None:
    with pytest.raises(ValidationError) as e:
        _table({"rewrite-files": {"thresholds": {"min-files": 3}}})
    text = str(e.value)
    assert "rewrite-files" in text and "'min-files'" in text
    assert "allowed: min-small-files, small-file-fraction" in text


def test_an_action_metadata_does_not_measure_takes_none() -> None:
    with pytest.raises(ValidationError) as e:
        _table({"delete-orphans": {"thresholds": {"min-small-files": 3}}})
    assert "delete-orphans: unknown threshold 'min-small-files'; allowed: none" in str(e.value)


@pytest.mark.parametrize(
    ("action", "name", "value", "allowed"),
    [
        ("rewrite-files", "min-small-files", 0, "a whole number >= 1"),
        ("rewrite-files", "min-small-files", 2.5, "a whole number >= 1"),
        ("rewrite-files", "small-file-fraction", 1.5, "a number >= 0.01 and <= 1"),
        ("rewrite-deletes", "min-deleted-row-ratio", "a lot", "a number >= 0 and <= 1"),
        ("expire-snapshots", "min-expirable-snapshots", True, "a whole number >= 1"),
    ],
)
def test_a_value_out_of_range_says_what_is_allowed(
    action: str, name: str, value: object, allowed: str
) -> None:
    with pytest.raises(ValidationError) as e:
        _table({action: {"thresholds": {name: value}}})
    text = str(e.value)
    assert f"{action}: threshold {name}: {value!r}" in text and f"allowed: {allowed}" in text


def test_defaults_and_the_actions_own_options() -> None:
    spec = _table({"rewrite-files": {"min-input-files": 12}, "rewrite-deletes": {}})
    files = spec.action_settings("rewrite-files")
    assert REWRITE_FILES.effective(files.thresholds, files) == {
        "min-small-files": 12,
        "small-file-fraction": 0.75,
    }
    deletes = spec.action_settings("rewrite-deletes")
    assert FILE_FIGURE_ACTIONS["rewrite-deletes"].effective({}, deletes) == {
        "min-delete-files": 5,
        "min-deleted-row-ratio": 0.1,
    }
    # a threshold set wins over the option it defaults to
    both = _table({"rewrite-files": {"min-input-files": 12, "thresholds": {"min-small-files": 100}}})
    s = both.action_settings("rewrite-files")
    assert REWRITE_FILES.effective(s.thresholds, s)["min-small-files"] == 100
