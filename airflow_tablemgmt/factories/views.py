"""A table's Details, Files or Snapshots view, whatever its format: the reader its format declared
(:func:`factories.api.declare_views`). The installed factories (built-in and plugins, by entry point) are
imported once when the format has declared none yet, since a factory declares its views when imported."""

from __future__ import annotations

from airflow_tablemgmt.metadata.format_views import ViewHook, formats_with, view_hook


def _load_factories() -> None:
    from airflow_tablemgmt.factories.discovery import default_factories

    default_factories()


def format_view(format: str, tab: str) -> ViewHook | None:
    """The reader of ``tab`` that ``format`` declared, or None when no installed factory declares one."""
    hook = view_hook(format, tab)
    if hook is None:
        _load_factories()
        hook = view_hook(format, tab)
    return hook


def formats_with_view(tab: str) -> list[str]:
    """Every installed format that declares a reader of ``tab``."""
    _load_factories()
    return formats_with(tab)
