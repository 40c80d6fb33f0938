"""A class-data-sharing (CDS) archive for the job's driver JVM, made once per host and setup.

Loading and verifying Spark's few thousand classes is a large part of a short job's start-up. Java 13+
can write the classes a run loaded to a *dynamic archive* at exit (``-XX:ArchiveClassesAtExit``) and map
it in later runs (``-XX:SharedArchiveFile``), which starts the driver and its session sooner.

An archive is valid for one driver classpath and one JVM build, so it is kept under a key hashing what
makes it valid (:func:`cache_key`): the java binary and its ``libjvm``, SPARK_HOME's jars, the classpath
directories Spark's launcher adds, ``--jars`` / ``--packages``, the user's driver JVM options and memory.
Files in the cache directory (``[tablemgmt] jvm_class_cache_dir``):

* ``driver-<key>-<size>.jsa`` — a finished archive. It is used only when its size is the one recorded
  in its name at the atomic rename that finished it: the JVM crashes on a truncated archive, so a file
  of any other size is removed, never handed to a JVM.
* ``driver-<key>.lock`` — the one creator of ``<key>`` (created with O_EXCL; a lock whose process is
  gone, or older than ``archive_files.LOCK_STALE_S``, is broken). Other runs go without the archive meanwhile.
* ``driver-<key>.<host>.<pid>.<n>.tmp`` — where the creating JVM dumps at exit; renamed into place only
  after the job exited 0 with a SUCCESS result, otherwise deleted (a dead creator's is removed later).
* ``driver-<key>.off`` — creation or use failed for a reason a rerun would meet again; the reason is in
  the file, and removing it lets the next run try again.

Only the driver in client or local mode benefits (it runs on this host); cluster deploy mode never
gets the options. Nothing here can fail a job: any error turns the cache off for that run.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from airflow_tablemgmt.spark.launch.archive_files import (
    acquire,
    counter,
    has_dynamic_magic,
    host_tag,
    prune,
    remove_dead_temps,
    unlink,
    write_text,
)

log = logging.getLogger(__name__)

FORMAT = 1  # bump when the key's inputs or the file layout change
DEFAULT_DIR = "~/.cache/airflow-tablemgmt/jvm"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"
# The JVM's own sharing options: when the user set any of these, their choice stands.
_USER_SHARING = re.compile(
    r"-Xshare|-XX:[+-]?(SharedArchiveFile|ArchiveClassesAtExit|SharedClassListFile|"
    r"DumpLoadedClassList|AutoCreateSharedArchive)"
)
_ENV_JAVA_OPTIONS = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")
_QUIET_DUMP = "-Xlog:cds=off -Xlog:cds+dynamic=off"
FATAL_BANNER = "A fatal error has been detected by the Java Runtime Environment"
# What the JVM prints when it cannot write the archive at exit (then it exits 1 after the job's work).
_DUMP_FAILED = ("Error occurred during initialization of VM", "Cannot have non-empty directory in paths")
_CDS_WARNING = re.compile(r"\[(?:warning|error)\s*\]\[cds")

Mode = Literal["use", "create", "off"]


@dataclass(frozen=True)
class ClassCacheSettings:
    """``[tablemgmt] jvm_class_cache`` (on by default) and ``[tablemgmt] jvm_class_cache_dir``."""

    enabled: bool = True
    directory: Path = field(default_factory=lambda: Path(DEFAULT_DIR).expanduser())


@dataclass
class DriverClassCache:
    """What one submission does with the archive: ``use`` it, ``create`` it, or go without (``off``)."""

    mode: Mode
    reason: str = ""
    options: str = ""  # JVM options for the driver, already merged with the user's
    archive: Path | None = None
    temp: Path | None = None
    lock: Path | None = None
    off_marker: Path | None = None
    _inode: int | None = None

    def describe(self) -> str:
        """The one task-log line about it."""
        if self.mode == "use":
            size = self.archive.stat().st_size if self.archive and self.archive.exists() else 0
            return f"JVM class cache: using {self.archive} ({size / 2**20:.0f} MB)"
        if self.mode == "create":
            return (
                f"JVM class cache: creating {self.archive} (a JVM writes it at exit: 10 s to minutes, "
                f"once; later runs start sooner)"
            )
        return f"JVM class cache: off ({self.reason})"

    def java_options(self, conf: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
        """``conf`` with the driver's JVM options for this mode (a copy; ``conf`` as is when off).

        A ``--conf`` replaces the defaults file's value, so ours is appended to the user's value from
        ``conf`` or else from ``spark-defaults.conf``.
        """
        if self.mode == "off" or not self.options:
            return conf
        theirs = conf.get(JAVA_OPTIONS, defaults.get(JAVA_OPTIONS, "")).strip()
        return {**conf, JAVA_OPTIONS: f"{theirs} {self.options}".strip()}

    def finish(self, lines: list[str], *, succeeded: bool, result_seen: bool) -> tuple[str | None, bool]:
        """After the run: finish or drop a created archive, drop a used one the JVM could not use or
        crashed on. Returns (a line for the task log or None, whether the JVM failed only in writing the
        archive at exit — the job's own result stands then)."""
        try:
            return self._finish(lines, succeeded=succeeded, result_seen=result_seen)
        except OSError as e:
            return f"JVM class cache: could not finish ({e})", False
        finally:
            self.release()

    def _finish(self, lines: list[str], *, succeeded: bool, result_seen: bool) -> tuple[str | None, bool]:
        if self.mode == "use" and self.archive is not None:
            crashed = not result_seen and any(FATAL_BANNER in ln for ln in lines)
            refused = next((ln.strip() for ln in lines if _CDS_WARNING.search(ln)), None)
            if crashed or refused:
                removed = self._remove_used()
                why = "the driver JVM crashed with it" if crashed else f"the JVM did not use it: {refused}"
                if refused and not crashed and self.off_marker is not None:
                    write_text(self.off_marker, f"{refused}\n")
                    return (
                        f"JVM class cache: {self.archive} {'removed' if removed else 'dropped'}; {why}; "
                        f"not created again for this setup while {self.off_marker} exists"
                    ), False
                gone = "removed" if removed else "dropped"
                return f"JVM class cache: {self.archive} {gone}; {why}; the next run recreates it", False
            return None, False
        if self.mode != "create" or self.temp is None or self.archive is None:
            return None, False
        dump_failed = result_seen and any(marker in ln for ln in lines for marker in _DUMP_FAILED)
        if dump_failed:
            if self.off_marker is not None:
                write_text(
                    self.off_marker, "the JVM could not write the archive at exit:\n" + "\n".join(lines[-5:])
                )
            return (
                f"JVM class cache: the JVM could not write the archive at exit; class sharing is off for "
                f"this setup while {self.off_marker} exists"
            ), True
        if not succeeded:
            return "JVM class cache: the run failed; its archive was not kept", False
        size = self.temp.stat().st_size if self.temp.exists() else 0
        if size == 0 or not has_dynamic_magic(self.temp):
            return "JVM class cache: the JVM wrote no usable archive; not kept", False
        final = self.archive.with_name(f"{self.archive.name}-{size}.jsa")
        os.replace(self.temp, final)
        self.archive = final
        prune(final.parent, keep=final)
        return f"JVM class cache: created {final} ({size / 2**20:.0f} MB)", False

    def _remove_used(self) -> bool:
        assert self.archive is not None
        try:
            if self._inode is None or self.archive.stat().st_ino == self._inode:
                self.archive.unlink()
                return True
        except FileNotFoundError:
            pass
        return False

    def release(self) -> None:
        """Delete the temp file (unless finished) and the lock; safe to call more than once."""
        if self.temp is not None:
            unlink(self.temp)
            self.temp = None
        if self.lock is not None:
            unlink(self.lock)
            self.lock = None


# --- what an archive depends on ---------------------------------------------------------------


def spark_conf_dir(env: dict[str, str]) -> Path | None:
    conf_dir = env.get("SPARK_CONF_DIR") or os.environ.get("SPARK_CONF_DIR")
    if conf_dir:
        return Path(conf_dir)
    home = env.get("SPARK_HOME") or os.environ.get("SPARK_HOME")
    return Path(home) / "conf" if home else None


def spark_defaults(env: dict[str, str]) -> dict[str, str]:
    """``spark-defaults.conf`` of SPARK_CONF_DIR (else SPARK_HOME/conf), as spark-submit reads it."""
    conf_dir = spark_conf_dir(env)
    if conf_dir is None:
        return {}
    try:
        text = (conf_dir / "spark-defaults.conf").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^\s=:]+)\s*[\s=:]\s*(.*)", line)
        if m:
            values[m.group(1)] = m.group(2).strip()
    return values


def _java_binary(env: dict[str, str]) -> Path | None:
    home = env.get("JAVA_HOME") or os.environ.get("JAVA_HOME")
    if home:
        return Path(home) / "bin" / "java"
    found = shutil.which("java", path=env.get("PATH") or os.environ.get("PATH"))
    return Path(found) if found else None


def _stat(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:-"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _classpath_dirs(env: dict[str, str], conf: dict[str, str], defaults: dict[str, str]) -> list[Path]:
    """Directories on the driver's application classpath (Spark's launcher adds the conf directory,
    HADOOP_CONF_DIR and YARN_CONF_DIR; the user may add others)."""
    dirs = [d for d in (spark_conf_dir(env),) if d is not None]
    entries: list[str] = []
    for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH", "SPARK_CLASSPATH"):
        entries += (env.get(name) or os.environ.get(name) or "").split(os.pathsep)
    entries += conf.get("spark.driver.extraClassPath", defaults.get("spark.driver.extraClassPath", "")).split(
        os.pathsep
    )
    dirs += [Path(e) for e in entries if e and not e.endswith("*") and Path(e).is_dir()]
    return dirs


def _non_empty(directory: Path) -> bool:
    try:
        return any(directory.iterdir())
    except OSError:
        return False


def _java_major(java: Path) -> int | None:
    from airflow_tablemgmt.spark.launch.java import java_major  # its release file first, then `java -version`

    return java_major(java)


def cache_key(
    *,
    env: dict[str, str],
    conf: dict[str, str],
    defaults: dict[str, str],
    jars: list[str],
    packages: str | None,
) -> str:
    """A hash of everything that makes an archive valid for the driver JVM this submission starts."""
    parts = [f"format={FORMAT}"]
    java = _java_binary(env)
    if java is not None:
        real = java.resolve()
        parts.append("java=" + _stat(real))
        parts += [_stat(p) for p in sorted(real.parent.parent.glob("lib/*/libjvm.so"))]
    home = Path(env.get("SPARK_HOME") or os.environ.get("SPARK_HOME") or ".").resolve()
    parts.append(f"spark_home={home}")
    try:
        parts += sorted(_stat(p) for p in (home / "jars").iterdir())
    except OSError:
        parts.append("jars:-")
    for d in _classpath_dirs(env, conf, defaults):
        parts.append(f"dir={d}:{_non_empty(d)}")
    parts += ["jar=" + _stat(Path(j)) for j in jars]
    parts.append(f"packages={packages or ''}")
    for key in (JAVA_OPTIONS, DEFAULT_JAVA_OPTIONS, "spark.driver.memory", "spark.driver.extraClassPath"):
        parts.append(f"{key}={conf.get(key, defaults.get(key, ''))}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


# --- deciding -------------------------------------------------------------------------------------


def plan(
    *,
    settings: ClassCacheSettings,
    conf: dict[str, str],
    jars: list[str],
    packages: str | None,
    env: dict[str, str],
    cluster: bool,
    verify: bool = False,
) -> tuple[DriverClassCache, dict[str, str]]:
    """Decide for one submission; returns the decision and the conf to submit with. Never raises."""
    defaults: dict[str, str] = {}
    try:
        defaults = spark_defaults(env)
        cache = _plan(
            settings=settings,
            conf=conf,
            defaults=defaults,
            jars=jars,
            packages=packages,
            env=env,
            cluster=cluster,
            verify=verify,
        )
    except Exception as e:  # noqa: BLE001 - an optimisation never fails a job
        log.debug("JVM class cache failed", exc_info=True)
        cache = DriverClassCache("off", f"{type(e).__name__}: {e}")
    return cache, cache.java_options(conf, defaults)


def _plan(
    *,
    settings: ClassCacheSettings,
    conf: dict[str, str],
    defaults: dict[str, str],
    jars: list[str],
    packages: str | None,
    env: dict[str, str],
    cluster: bool,
    verify: bool,
) -> DriverClassCache:
    if not settings.enabled:
        return DriverClassCache("off", "[tablemgmt] jvm_class_cache is false")
    deploy_mode = conf.get("spark.submit.deployMode", defaults.get("spark.submit.deployMode", "client"))
    if cluster or deploy_mode == "cluster":
        return DriverClassCache("off", "cluster deploy mode: the driver runs elsewhere")
    users = [conf.get(k, defaults.get(k, "")) for k in (JAVA_OPTIONS, DEFAULT_JAVA_OPTIONS)]
    users += [env.get(k, os.environ.get(k, "")) for k in _ENV_JAVA_OPTIONS]
    if any(_USER_SHARING.search(u) for u in users):
        return DriverClassCache("off", "the driver's JVM options already choose class sharing")
    key = cache_key(env=env, conf=conf, defaults=defaults, jars=jars, packages=packages)
    directory = settings.directory.expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / f"driver-{key}"
    off_marker = base.with_name(base.name + ".off")
    if off_marker.exists():
        return DriverClassCache("off", f"{off_marker} exists (remove it to try again)")
    for found in sorted(directory.glob(f"{base.name}-*.jsa")):
        recorded = found.name[len(base.name) + 1 : -len(".jsa")]
        st = found.stat()
        if recorded.isdigit() and st.st_size == int(recorded):
            verify_opt = " -XX:+VerifySharedSpaces" if verify else ""
            return DriverClassCache(
                "use",
                options=f"-XX:SharedArchiveFile={found}{verify_opt}",
                archive=found,
                off_marker=off_marker,
                _inode=st.st_ino,
            )
        log.warning(
            "JVM class cache: %s is %d bytes, not the %s recorded; removed", found, st.st_size, recorded
        )
        unlink(found)
    dirs = [d for d in _classpath_dirs(env, conf, defaults) if _non_empty(d)]
    if dirs:
        return DriverClassCache(
            "off",
            f"{dirs[0]} is a non-empty directory on the driver's classpath, which the JVM cannot archive",
        )
    java = _java_binary(env)
    major = _java_major(java) if java is not None else None
    if major is None or major < 13:
        return DriverClassCache(
            "off", f"Java {major or '?'} cannot write a dynamic archive (13 or later can)"
        )
    lock = base.with_name(base.name + ".lock")
    if not acquire(lock):
        return DriverClassCache("off", "another run is creating the archive")
    remove_dead_temps(directory)
    temp = base.with_name(f"{base.name}.{host_tag()}.{os.getpid()}.{next(counter)}.tmp")
    return DriverClassCache(
        "create",
        options=f"-XX:ArchiveClassesAtExit={temp} {_QUIET_DUMP}",
        archive=base,
        temp=temp,
        lock=lock,
        off_marker=off_marker,
    )
