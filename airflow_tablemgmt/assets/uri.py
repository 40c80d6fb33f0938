"""``tablemgmt://<catalog>/<namespace>/<table>`` (the table: its snapshot watcher's asset) and
``tablemgmt://<catalog>/<namespace>/<table>/refresh`` (a dynamic table's refreshes).

Airflow has already lower-cased the scheme, dropped user info and the fragment and stripped trailing
slashes when :func:`sanitize_uri` runs. It checks the shape, so a DAG that schedules on a misspelt
asset fails at parse time with the shape it should have had instead of waiting forever, and keeps the
parts' case: identifiers are case-preserving (``core.identifiers``), and a URI this provider made
comes back unchanged, so assets already in Airflow's database keep their identity.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult

SCHEME = "tablemgmt"
REFRESH_SUFFIX = "refresh"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
SHAPE = "tablemgmt://<catalog>/<namespace>/<table> or tablemgmt://<catalog>/<namespace>/<table>/refresh"


def table_uri(catalog: str, namespace: str, name: str) -> str:
    return f"{SCHEME}://{catalog}/{namespace}/{name}"


def refresh_uri(catalog: str, namespace: str, name: str) -> str:
    return f"{table_uri(catalog, namespace, name)}/{REFRESH_SUFFIX}"


def sanitize_uri(parts: SplitResult) -> SplitResult:
    """Airflow's asset URI normalizer for the ``tablemgmt`` scheme; ``ValueError`` names the problem."""
    uri = parts.geturl()
    if parts.query:
        raise ValueError(f"asset URI {uri!r}: takes no query; expected {SHAPE}")
    if parts.port is not None or not _IDENT.fullmatch(parts.netloc):
        raise ValueError(f"asset URI {uri!r}: {parts.netloc!r} is not a catalog name; expected {SHAPE}")
    segments = parts.path.strip("/").split("/") if parts.path.strip("/") else []
    if len(segments) == 3 and segments[2] == REFRESH_SUFFIX:
        segments = segments[:2]
    # The namespace may have several levels, written with dots as in the table id (tablemgmt://lake/a.b/t).
    if (
        len(segments) != 2
        or not all(_IDENT.fullmatch(s) for s in segments[0].split("."))
        or not _IDENT.fullmatch(segments[1])
    ):
        raise ValueError(f"asset URI {uri!r}: expected {SHAPE}")
    return parts
