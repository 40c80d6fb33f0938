"""A table's Details, Files or Snapshots view, whatever its format: the reader its format's descriptor names
(``Format.views``), imported on first use."""

from __future__ import annotations

from airflow_tablemgmt.core.formats import FORMATS
from airflow_tablemgmt.metadata.format_views import TABS, ViewHook


def format_view(format: str, tab: str) -> ViewHook | None:
    """The reader of ``tab`` that ``format`` declares, or None when it declares none (or is not installed)."""
    fmt = FORMATS.find(format)
    if fmt is None or tab not in TABS or tab not in fmt.views:
        return None
    hook: ViewHook = fmt.load(fmt.views[tab])
    return hook


def formats_with_view(tab: str) -> list[str]:
    """Every installed format that declares a reader of ``tab``, sorted."""
    return sorted(f.name for f in FORMATS.all() if tab in f.views)
