"""Read a maintainer's options through the action's settings model in ``core.actions``.

The models are the single source of defaults and limits; a bad option fails the job with the
same wording a bad declaration gets (``<action>.<option>: <what is wrong>``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError

from airflow_tablemgmt.core.actions import ActionSettings
from airflow_tablemgmt.spark.errors import InvalidJobSpec

S = TypeVar("S", bound=ActionSettings)


def parse_settings(model: type[S], options: dict[str, Any] | None, action: str) -> S:
    try:
        return model.model_validate(options or {})
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()))
            msg = str(err.get("msg", "")).removeprefix("Value error, ")
            got = "" if err.get("type") in ("value_error", "missing") else f", got {err.get('input')!r}"
            problems.append(f"{action}{'.' + loc if loc else ''}: {msg}{got}")
        raise InvalidJobSpec("; ".join(problems)) from None
