"""The sandbox a job that runs user SQL starts in (issue 35, *isolation*): the driver of a dynamic table's
refresh, creation and analysis cannot read other processes' environments, the DAGs folder or Airflow's
configuration, and cannot write where Airflow reads code.

A dedicated OS identity would need root to set up on every worker; Linux namespaces give the same
separation to an unprivileged worker. spark-submit runs under

    unshare --user --map-root-user --mount --pid --fork --kill-child --mount-proc \\
        <python> -I -S sandbox.py --hide … --read-only … --keep … --uid U --gid G -- spark-submit …

* a new **PID namespace** with its own ``/proc``: the job sees only its own processes, so no
  ``/proc/<pid>/environ`` of the worker, the scheduler or the api-server (whose environments hold
  ``AIRFLOW__API_AUTH__JWT_SECRET``, database URLs …) exists for it; ``--kill-child``: when the
  worker kills spark-submit (or dies: ``die_with_parent``), everything in the namespace dies with it;
* a new **mount namespace** in which this file (stage one, root of the new user namespace) mounts an
  empty tmpfs over every ``--hide`` path (the DAGs folder, the plugins folder, ``AIRFLOW_HOME`` with
  ``airflow.cfg``, the SQLite databases and secret files in it; an empty file over a hidden file) and
  remounts every ``--read-only`` path read-only (the Python prefix, the package): the job cannot read
  DAG code or Airflow's secrets and cannot plant code Airflow would import. A ``--keep`` path the job
  needs (its spec file's directory, a local warehouse, the venv) that lies inside a hidden path is
  mounted back as it was (a kept path inside a read-only one stays read-only);
* stage two is ``unshare --user --map-user=U --map-group=G --mount``: the job runs as the worker's own
  uid (files it writes to a local warehouse are the worker's, as without the sandbox) in a user
  namespace that holds no capability over the first one's mounts, which a new mount namespace owned by
  it also locks: it cannot unmount the tmpfs to see what is under it.

The network is not isolated (the job reads object stores and catalogs); what the job may reach there
is bounded by the plan check and the environment allow-list (docs/security.md).

Only the standard library is imported: stage one runs this file by path (``python -I``), without the
package's imports.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

THIS_FILE = Path(__file__).resolve()
#: ``[tablemgmt] user_sql_sandbox``: ``on`` (default: fail when the kernel does not allow it) or ``off``.
MODES = ("on", "off")
OUTER = ("--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc")
_PROBE: dict[str, str | None] = {}


@dataclass(frozen=True)
class Sandbox:
    """What to hide, what to make read-only, and what the job needs back."""

    hide: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` (spark-submit's command line) run inside the sandbox."""
        unshare = shutil.which("unshare") or "unshare"
        args = [unshare, *OUTER, sys.executable, "-I", "-S", str(THIS_FILE)]
        for flag, paths in (("--hide", self.hide), ("--read-only", self.read_only), ("--keep", self.keep)):
            for path in _existing(paths):
                args += [flag, path]
        return [*args, "--uid", str(self.uid), "--gid", str(self.gid), "--", *argv]


def _existing(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p and os.path.isabs(p) and os.path.exists(p):
            resolved = os.path.realpath(p)
            if resolved not in out:
                out.append(resolved)
    return out


def unavailable() -> str | None:
    """Why the sandbox cannot be created here, or None (probed once per process: ~10 ms)."""
    if "reason" not in _PROBE:
        unshare = shutil.which("unshare")
        if not sys.platform.startswith("linux") or unshare is None:
            _PROBE["reason"] = "it needs Linux and util-linux's unshare"
        else:
            probe = subprocess.run(
                [unshare, *OUTER, "true"], capture_output=True, text=True, timeout=30, check=False
            )
            failed = probe.stderr.strip() or f"exit code {probe.returncode}"
            _PROBE["reason"] = (
                None
                if probe.returncode == 0
                else f"unshare {' '.join(OUTER)} failed ({failed}): the kernel does not allow unprivileged user "
                "namespaces here (kernel.unprivileged_userns_clone, user.max_user_namespaces, AppArmor's "
                "kernel.apparmor_restrict_unprivileged_userns)"
            )
    return _PROBE["reason"]


# -- stage one: inside the new user, mount and PID namespaces ----------------------------------------


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _keep_fds(keep: list[str], covered: list[str]) -> dict[str, int]:
    """An O_PATH descriptor of each kept path that the mounts below would cover (before they do)."""
    return {
        k: os.open(k, os.O_PATH | os.O_CLOEXEC) for k in keep if any(_under(k, c) and k != c for c in covered)
    }


def _rebind(path: str, fd: int) -> None:
    if os.path.isdir(f"/proc/{os.getpid()}/fd/{fd}"):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(path).touch()
    _mount("--no-canonicalize", "--rbind", f"/proc/{os.getpid()}/fd/{fd}", path)


def setup(hide: list[str], read_only: list[str], keep: list[str]) -> None:
    """The mounts of stage one (see the module)."""
    _mount("--make-rprivate", "/")
    hide = [h for h in hide if not any(_under(h, o) and h != o for o in hide)]  # the outermost only
    fds = _keep_fds(keep, hide)
    for path in hide:
        if os.path.isdir(path):
            _mount("-t", "tmpfs", "-o", "size=1m,mode=0755,nosuid,nodev", "tmpfs", path)
        else:
            _mount("--bind", "/dev/null", path)
    for path, fd in fds.items():
        if any(_under(path, h) for h in hide):
            _rebind(path, fd)
    for path in read_only:
        if any(_under(path, h) for h in hide) and not any(_under(path, k) for k in fds):
            continue  # hidden already
        _mount("--rbind", path, path)
        _mount("-o", "remount,bind,ro", path)
    for fd in fds.values():
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sandbox.py", description="stage one of the user-SQL sandbox")
    parser.add_argument("--hide", action="append", default=[])
    parser.add_argument("--read-only", action="append", default=[])
    parser.add_argument("--keep", action="append", default=[])
    parser.add_argument("--uid", type=int, default=os.getuid())
    parser.add_argument("--gid", type=int, default=os.getgid())
    parser.add_argument(
        "--outer",
        action="store_true",
        help="start the sandbox around the command (scripts/connect.sh); without it: stage one, inside it",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    if args.outer:
        reason = unavailable()
        if reason is not None:
            print(f"tablemgmt sandbox: {reason}", file=sys.stderr, flush=True)
            return 70
        box = Sandbox(tuple(args.hide), tuple(args.read_only), tuple(args.keep), args.uid, args.gid)
        wrapped = box.wrap(command)
        os.execvp(wrapped[0], wrapped)
    try:
        setup(args.hide, args.read_only, args.keep)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"tablemgmt sandbox: setting up the mounts failed: {e}", file=sys.stderr, flush=True)
        return 70
    inner = ["unshare", "--user", f"--map-user={args.uid}", f"--map-group={args.gid}", "--mount", "--"]
    os.execvp(inner[0], [*inner, *command])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
