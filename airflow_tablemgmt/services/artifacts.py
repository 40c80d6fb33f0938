"""The Spark artifacts of this host: what is cached, and fetching them ahead of the jobs that need them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.spark.launch.artifacts import (
    ArtifactSettings,
    Resolved,
    all_needs,
    cached_jar,
    format_needs,
    resolve,
    wheel_jar,
)


def selected_needs(formats: Sequence[str], needs: Sequence[str], everything: bool) -> list[str]:
    """The needs named by ``--format`` and ``--need`` (default: the Iceberg runtime); all with ``everything``."""
    known, by_format = all_needs(), format_needs()
    if everything:
        return list(known)
    for f in formats:
        if f not in by_format:
            raise InvalidInput(f"--format: unknown table format {f!r}; allowed: {', '.join(by_format)}")
    for n in needs:
        if n not in known:
            raise InvalidInput(f"--need: unknown artifact need {n!r}; allowed: {', '.join(known)}")
    chosen = [n for f in formats for n in by_format[f]] + list(needs)
    return list(dict.fromkeys(chosen or ["iceberg"]))


def fetch_jars(
    needs: Sequence[str],
    *,
    directory: Path | None = None,
    progress: Callable[[str], None] = print,
) -> tuple[ArtifactSettings, list[Resolved]]:
    """Download (and verify) what ``needs`` lists into the jar cache; what is cached already is kept.

    Always from the repository, even offline workers' settings aside: this is the command that fills the
    cache. The Iceberg runtime is fetched too when a wheel provides it, so the cache serves a worker
    without that wheel.
    """
    settings = artifact_settings()
    settings = ArtifactSettings(
        directory=directory or settings.directory, repository=settings.repository, offline=False
    )
    return settings, resolve(needs, settings, use_wheel=False, progress=progress)


@dataclass(frozen=True)
class JarStatus:
    need: str
    coordinate: str
    state: str  # cached | wheel | missing
    path: str


def jar_status(directory: Path | None = None) -> tuple[ArtifactSettings, list[JarStatus]]:
    """Every known artifact and where a job would take it from on this host."""
    settings = artifact_settings()
    if directory is not None:
        settings = ArtifactSettings(
            directory=directory, repository=settings.repository, offline=settings.offline
        )
    rows = []
    for need in all_needs().values():
        for a in need.artifacts:
            wheel, cached = wheel_jar(a), cached_jar(a, settings.directory)
            state, path = ("wheel", wheel) if wheel else ("cached", cached) if cached else ("missing", None)
            rows.append(JarStatus(need.name, a.coordinate, state, str(path or "")))
    return settings, rows
