"""Which tables a policy covers (:class:`PolicyMatch`) and how specific it is: the matching half of
``core/policies.py``, whose docstring defines specificity and precedence."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from airflow_tablemgmt.core.formats import known_format


def _kebab(name: str) -> str:
    return name.replace("_", "-")


_PATTERN = re.compile(r"[A-Za-z0-9_.*?\[\]!-]{1,255}")
PATTERN_RULE = (
    "a name or a glob of letters, digits, '_', '.', with '*' (any characters, dots included), '?' (one "
    "character) and '[...]' (one of a set)"
)


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _pattern_level(patterns: Sequence[str]) -> int:
    """2 exact, 1 glob, 0 everything (see the module docstring)."""
    return min((0 if p == "*" else 1 if _is_glob(p) else 2) for p in patterns)


def _patterns(value: Any, field_name: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ValueError(f"{field_name}: expected a pattern or a non-empty list of patterns, got {value!r}")
    for item in items:
        if not isinstance(item, str) or not _PATTERN.fullmatch(item):
            raise ValueError(f"{field_name}: {item!r} is not a valid pattern ({PATTERN_RULE})")
    return list(dict.fromkeys(items))


class SpecModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=_kebab, populate_by_name=True, extra="forbid", frozen=True, defer_build=True
    )


# One pattern or a list of them, in the JSON schema as in validation (a schema never stricter than the model).
_ONE_OR_MORE = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]}
Patterns = Annotated[list[str], WithJsonSchema(_ONE_OR_MORE)]


class PolicyMatch(SpecModel):
    """Which tables a policy covers: every condition must hold (an absent one holds for every table).

    Patterns are case-sensitive globs matched against the whole name: ``namespace: sales`` is the
    namespace ``sales`` only, ``sales.*`` every namespace below it (``sales.eu``, ``sales.eu.b2b``)."""

    catalog: Patterns = Field(default_factory=lambda: ["*"], description="catalog name pattern(s)")
    namespace: Patterns = Field(
        default_factory=lambda: ["*"], description="namespace pattern(s), dots between levels"
    )
    name: Patterns = Field(default_factory=lambda: ["*"], description="table name pattern(s)")
    format: Annotated[list[str] | None, WithJsonSchema(_ONE_OR_MORE)] = Field(
        default=None, description="the tables' format(s); absent: every format"
    )
    properties: dict[str, str] = Field(
        default_factory=dict,
        description="table property -> value pattern; the property must be set and match",
    )

    @field_validator("catalog", "namespace", "name", mode="before")
    @classmethod
    def _globs(cls, v: Any, info: Any) -> list[str]:
        return _patterns(v, info.field_name)

    @field_validator("format", mode="before")
    @classmethod
    def _formats(cls, v: Any) -> list[str] | None:
        if v is None:
            return None
        items = [v] if isinstance(v, str) else v
        if not isinstance(items, list) or not items:
            raise ValueError(f"format: expected a format name or a non-empty list of them, got {v!r}")
        try:
            return list(dict.fromkeys(known_format(i) for i in items))
        except ValueError as e:
            raise ValueError(f"format: {e}") from None

    @field_validator("properties")
    @classmethod
    def _properties(cls, v: dict[str, str]) -> dict[str, str]:
        for key, pattern in v.items():
            if not key or len(key) > 255 or "\x00" in key:
                raise ValueError(f"properties: {key!r} is not a property name (1-255 characters, no NUL)")
            if not isinstance(pattern, str) or not pattern or len(pattern) > 1024 or "\x00" in pattern:
                raise ValueError(f"properties.{key}: {pattern!r} is not a value pattern (1-1024 characters)")
        return v

    def matches(
        self, catalog: str, namespace: str, name: str, fmt: str, properties: Mapping[str, str]
    ) -> bool:
        def any_of(patterns: list[str], value: str) -> bool:
            return any(fnmatch.fnmatchcase(value, p) for p in patterns)

        if not (
            any_of(self.catalog, catalog) and any_of(self.namespace, namespace) and any_of(self.name, name)
        ):
            return False
        if self.format is not None and fmt not in self.format:
            return False
        return all(
            k in properties and fnmatch.fnmatchcase(str(properties[k]), p) for k, p in self.properties.items()
        )

    def specificity(self) -> tuple[int, int, int, int, int]:
        """``(name, namespace, catalog, properties, format)``; see the module docstring."""
        return (
            _pattern_level(self.name),
            _pattern_level(self.namespace),
            _pattern_level(self.catalog),
            len(self.properties),
            0 if self.format is None else 1,
        )
