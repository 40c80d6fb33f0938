"""Free-text fields (owners, paths, lookups by id): a length the store's column holds and no control
characters.

PostgreSQL refuses a NUL byte in any text and a string longer than its ``VARCHAR(n)``; SQLite stores
both. Checking here gives the same answer on every store: a 422 naming the field, not a database error.
The limits are the store's column widths (``store/models.py``, a unit test compares them).
"""

from __future__ import annotations

import re

from airflow_tablemgmt.core.errors import InvalidDeclaration

# C0 controls, DEL and C1 controls: invisible in logs and the UI, and NUL is refused by PostgreSQL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NUL = "\x00"

OWNER_MAX_LEN = 255  # tms_table.owner_team
WAREHOUSE_MAX_LEN = 2048  # tms_catalog.warehouse
TABLE_ID_MAX_LEN = 3 * 128 + 2  # tms_table.table_id, tms_process.table_id
ACTION_MAX_LEN = 64  # tms_process.action
FORMAT_MAX_LEN = 32  # tms_table.format, tms_catalog.type


class InvalidText(InvalidDeclaration):
    """A string field with a control character, or longer than the store keeps."""


def check_text(value: str, field: str, max_len: int | None = None) -> str:
    """Return ``value`` if it fits ``max_len`` characters and has no control character, else raise
    :class:`InvalidText` naming the field, the problem and the limit."""
    if not isinstance(value, str):
        raise InvalidText(f"{field}: expected a string, got {type(value).__name__}")
    if max_len is not None and len(value) > max_len:
        raise InvalidText(f"{field}: {len(value)} characters; at most {max_len} are allowed")
    found = _CONTROL.search(value)
    if found:
        raise InvalidText(
            f"{field}: contains the control character U+{ord(found.group()):04X} at position "
            f"{found.start()}; control characters (including NUL and newlines) are not allowed"
        )
    return value


def check_no_nul(value: str, field: str) -> str:
    """For multi-line text (queries, property values): only NUL, which no database stores, is refused."""
    if _NUL in value:
        raise InvalidText(f"{field}: contains a NUL character (U+0000), which the store cannot keep")
    return value


#: The same rule as an OpenAPI/pydantic ``pattern`` for path and query parameters.
TEXT_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
