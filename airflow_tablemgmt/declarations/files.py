"""Where declarations live and how a file is read: ``tables.yaml`` (``$TABLEMGMT_TABLES_YAML``, else
the dags folder's) and ``tables.d/*.yaml`` beside it. Reading never raises: a missing file declares
nothing, an unreadable one is an error of the file (and so never prunes)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from airflow_tablemgmt.declarations.errors import DeclarationError, file_error
from airflow_tablemgmt.declarations.model import LoadedDeclarations
from airflow_tablemgmt.declarations.parse import begin_parse, parse_declarations_text

TABLES_YAML_ENV = "TABLEMGMT_TABLES_YAML"
#: Directory beside tables.yaml whose ``*.yaml`` / ``*.yml`` files declare more tables (one team per file).
TABLES_D = "tables.d"


def default_tables_yaml() -> Path:
    """``$TABLEMGMT_TABLES_YAML``, else ``<dags folder>/tables.yaml``."""
    if os.environ.get(TABLES_YAML_ENV):
        return Path(os.environ[TABLES_YAML_ENV])
    dags = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER") or os.path.join(
        os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "dags"
    )
    return Path(dags) / "tables.yaml"


def load_declarations(path: Path | str | None = None) -> LoadedDeclarations:
    """Read and validate a declarations file. Never raises.

    A missing file declares nothing (no error: store-only deployments have none). A directory, a
    broken symlink, a file the OS refuses to open or one that is not UTF-8 is an error of the file.
    None of these declares tables, so none of them prunes.
    """
    text, out = read_declarations_text(path)
    if text is None:
        return out
    return parse_declarations_text(text, out.source, known_catalogs=sibling_catalogs(Path(out.source)))


def same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def sibling_catalogs(path: Path) -> set[str]:
    """For a team file (``tables.d/<team>.yaml``) read on its own, e.g. by ``tablemgmt apply``: the
    catalogs the rest of its set declares (``../tables.yaml`` and the other team files), which its
    tables may name as they do in a DAG-file parse."""
    if path.parent.name != TABLES_D:
        return set()
    paths, _ = declaration_paths(path.parent.parent / "tables.yaml")
    names: set[str] = set()
    for other in paths:
        if other == path:
            continue
        text, out = read_declarations_text(other)
        if text is not None:
            names |= {c.name for c in begin_parse(text, out.source).out.catalogs}
    return names


def read_declarations_text(path: Path | str | None = None) -> tuple[str | None, LoadedDeclarations]:
    """``(text, empty result)`` of a readable file, else ``(None, result with the file's error)``
    (no error for a missing file). Never raises."""
    p = Path(path) if path is not None else default_tables_yaml()
    source = str(p)
    out = LoadedDeclarations(source=source)
    try:
        os.stat(p)
    except FileNotFoundError:
        if os.path.lexists(p):
            out.errors.append(file_error(source, f"is a broken symlink (to {os.readlink(p)!r})"))
        return None, out
    except OSError as e:
        out.errors.append(file_error(source, f"cannot be read: {e.strerror or e}"))
        return None, out
    if p.is_dir():
        out.errors.append(file_error(source, "is a directory, not a file"))
        return None, out
    try:
        raw = p.read_bytes()
    except OSError as e:
        out.errors.append(file_error(source, f"cannot be read: {e.strerror or e}"))
        return None, out
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        out.errors.append(
            file_error(
                source, f"is not UTF-8 (byte {raw[e.start]:#04x} at offset {e.start}); save it as UTF-8"
            )
        )
        return None, out
    out.digest = hashlib.sha256(raw).hexdigest()
    return text, out


def declaration_paths(tables_yaml: Path | str | None = None) -> tuple[list[Path], list[DeclarationError]]:
    """``tables.yaml`` and, beside it, ``tables.d/*.yaml`` / ``*.yml`` sorted by name: the files
    that declare tables, in the order that decides which file wins a conflict. An unreadable
    ``tables.d`` is an error (and, like any error of a file, stops pruning)."""
    main = Path(tables_yaml) if tables_yaml is not None else default_tables_yaml()
    paths = [main]
    extra = main.parent / TABLES_D
    errors: list[DeclarationError] = []
    try:
        names = sorted(os.listdir(extra))
    except FileNotFoundError:
        return paths, errors
    except NotADirectoryError:
        errors.append(file_error(str(extra), "is not a directory; put team files in tables.d/<team>.yaml"))
        return paths, errors
    except OSError as e:
        errors.append(file_error(str(extra), f"cannot be listed: {e.strerror or e}"))
        return paths, errors
    paths += [extra / n for n in names if n.endswith((".yaml", ".yml")) and not n.startswith(".")]
    return paths, errors
