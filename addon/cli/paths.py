"""Every path the batch command will write, checked before any work: each output is a
regular file or absent, in a folder this process can write, and none is the input, a file
the input uses (a cache it plays, an image, a library) or another output. A run that would
lose a file stops here with exit 2 and writes nothing.

While a run works, a lock file beside each of its outputs (``.<name>.fit-lock``, holding the
process and host) keeps other runs from writing the same files. The operating system's
lock on it ends with the process, so a file left by a killed run is recognised as stale
and taken over."""

from __future__ import annotations

import argparse
import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import bpy

from ...warp_core.io import (
    OutputPathError,
    check_output_file,
    check_output_folder,
    remove_stale_temporaries,
    same_file,
)
from ..scene.bake import bake_filename
from .args import UsageError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

LOCK_MARK = ".fit-lock"
REPORT_BYTES_MAX = 64 << 20  # a larger file is no report of ours


@dataclass
class OutputPlan:
    """Resolved output paths of one run (None: not asked for)."""

    input: Path
    save: Path | None = None
    report: Path | None = None
    save_preset: Path | None = None
    log: Path | None = None
    bake_dir: Path | None = None
    bake_files: dict[str, Path] = field(default_factory=dict)  # object name -> .pc2
    in_place: bool = False  # outputs may replace the input and the files it uses
    locks: list[OutputLock] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)  # folders made for the locks, outermost first

    def outputs(self) -> list[tuple[Path, str]]:
        """(path, the option that asked for it) of every file this run may write."""
        found = [(self.save, "--save"), (self.report, "--report")]
        found += [(self.save_preset, "--save-preset"), (self.log, "--log")]
        found += [(path, f"--bake: the cache of '{name}'") for name, path in self.bake_files.items()]
        return [(path, what) for path, what in found if path is not None]

    def lock(self) -> None:
        """Take the lock of every output; UsageError (and none held) when another run holds one."""
        wanted = [(path.parent, what.partition(":")[0]) for path, what in self.outputs()]
        if self.bake_dir is not None and self.bake_files:
            wanted.append((self.bake_dir, "--bake"))
        for wanted_folder, what in wanted:
            missing = [wanted_folder, *wanted_folder.parents]
            missing = [folder for folder in missing if not folder.exists()]
            for folder in reversed(missing):
                try:
                    folder.mkdir()
                except OSError as e:
                    self.unlock()
                    raise UsageError(f"{what}: cannot create {folder}: {e.strerror or e}") from None
                self.made.append(folder)
        try:
            for path, what in self.outputs():
                self.locks.append(take_lock(path, what))
        except UsageError:
            self.unlock()
            raise

    def unlock(self) -> None:
        """Release the locks, and remove the folders made for them if they stayed empty."""
        while self.locks:
            self.locks.pop().release()
        while self.made:
            try:
                self.made.pop().rmdir()
            except OSError:
                pass  # not empty: an output was written there

    def folders(self) -> list[Path]:
        found = [p.parent for p in (self.save, self.report, self.save_preset, self.log) if p is not None]
        if self.bake_dir is not None:
            found.append(self.bake_dir)
        return list(dict.fromkeys(found))

    def remove_stale_temporaries(self) -> None:
        """Temporaries that killed runs left where this run writes."""
        held = {lock.path for lock in self.locks}
        for folder in self.folders():
            remove_stale_temporaries(folder)
            remove_stale_locks(folder, held)


def plan_outputs(args: argparse.Namespace, input_path: Path) -> OutputPlan:
    """Check ``--save``, ``--report`` and ``--bake`` against the input and each other."""
    try:
        plan = OutputPlan(input=input_path, in_place=bool(args.in_place))
        if args.save:
            plan.save = output_file(args.save, "--save")
        elif args.in_place:
            plan.save = check_output_file(input_path, "--in-place")
        if plan.save is not None and same_file(plan.save, input_path) and not args.in_place:
            raise UsageError("--save would overwrite the input file: add --in-place to allow that")
        if args.report:
            plan.report = output_file(args.report, "--report")
            if same_file(plan.report, input_path):
                raise UsageError(f"--report {args.report} is the input file: choose another file")
            if same_file(plan.report, plan.save):
                raise UsageError(f"--report and --save name the same file {plan.report}: choose two files")
        if args.save_preset and not args.save_preset.lower().endswith(".json"):
            raise UsageError(f"--save-preset {args.save_preset}: preset files end in .json")
        for option in ("--save-preset", "--log"):
            given = getattr(args, option[2:].replace("-", "_"))
            if given:
                path = output_file(given, option)
                _distinct(path, option, plan)
                setattr(plan, option[2:].replace("-", "_"), path)
        if args.bake:
            plan.bake_dir = check_output_folder(args.bake, "--bake")
    except OutputPathError as e:
        raise UsageError(str(e)) from e
    return plan


def output_file(value: str, what: str) -> Path:
    """An output file's absolute path, checked (:func:`check_output_file`); a missing folder
    for it is allowed where it can be made (a farm's results folder), and made with the locks."""
    path = Path(value).expanduser().resolve()
    if not path.parent.exists():
        check_output_folder(path.parent, what)
        return path
    return check_output_file(path, what)


def _distinct(path: Path, option: str, plan: OutputPlan) -> None:
    if same_file(path, plan.input):
        raise UsageError(f"{option} {path} is the input file: choose another file")
    for other, what in plan.outputs():
        if same_file(path, other):
            raise UsageError(f"{option} and {what} name the same file {path}: choose two files")


def usage_report_path(argv: list[str]) -> Path | None:
    """Where the report of a run refused for bad input goes: ``--report`` when the command
    line names a file this run may write that is no other path of the command line (the bad
    input may be that it names another output) and is absent or an earlier report; else None."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("scene", nargs="?")
    others = ("--save", "--save-preset", "--log", "--bake")
    for option in ("--report", *others):
        parser.add_argument(option)
    try:
        known, _ = parser.parse_known_args([a for a in argv if a not in ("-h", "--help")])
    except (SystemExit, argparse.ArgumentError):
        return None
    if not known.report:
        return None
    try:
        path = output_file(known.report, "--report")
    except (OutputPathError, OSError, ValueError):
        return None
    named = [known.scene, *(getattr(known, o[2:].replace("-", "_")) for o in others)]
    if any(same_file(path, Path(p).expanduser().resolve()) for p in named if p):
        return None
    if path.exists() and not _is_report(path):
        return None
    return path


def _is_report(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            document = json.loads(f.read(REPORT_BYTES_MAX))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and {"version", "objects", "exit_code"} <= document.keys()


def plan_bake_files(plan: OutputPlan, names: Iterable[str]) -> None:
    """The ``.pc2`` of each object in ``--bake DIR``: unique (also where case does not count)
    and none of them the input, ``--save`` or ``--report``."""
    if plan.bake_dir is None:
        return
    taken: dict[str, str] = {}
    for name in names:
        path = plan.bake_dir / bake_filename(name)
        if plan.bake_dir.is_dir():  # else it is made at bake time, empty
            try:
                path = check_output_file(path, "--bake")
            except OutputPathError as e:
                raise UsageError(str(e)) from e
        for other, flag in ((plan.input, "the input file"), (plan.save, "--save"), (plan.report, "--report")):
            if same_file(path, other):
                raise UsageError(f"--bake: the cache of '{name}' would overwrite {flag} ({path})")
        key = path.name.casefold()
        if key in taken:
            raise UsageError(f"--bake: '{name}' and '{taken[key]}' would share the cache file {path.name}")
        taken[key] = name
        plan.bake_files[name] = path


def check_references(plan: OutputPlan) -> None:
    """No output may replace a file the open input uses (a cache a modifier plays, an image,
    a linked library, ...): that file would then show this run's data. ``--in-place`` allows it."""
    if plan.in_place:
        return
    used = [Path(p).resolve() for p in bpy.utils.blend_paths(absolute=True, packed=False, local=False)]
    for path, what in plan.outputs():
        for other in used:
            if path == other or same_file(path, other):
                change = "another --bake folder" if what.startswith("--bake") else f"another {what} file"
                raise UsageError(
                    f"{what} would replace {path}, which the input file uses: choose {change}, "
                    "or add --in-place to replace it"
                )


# -- locks ------------------------------------------------------------------------------------------------


@dataclass
class OutputLock:
    """A lock file beside an output, held by this process (see the module's docstring)."""

    path: Path
    fd: int

    def release(self) -> None:
        if os.name == "posix":  # removed while still held: a run waiting on it then takes a new file
            _unlink(self.path)
            os.close(self.fd)
        else:  # an open file cannot be removed on Windows
            os.close(self.fd)
            _unlink(self.path)


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{LOCK_MARK}")


def take_lock(path: Path, what: str) -> OutputLock:
    """The lock of output ``path``; UsageError naming the owner when a live run holds it."""
    lock = lock_path(path)
    for _attempt in range(20):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise UsageError(f"{what}: cannot make the lock file {lock}: {e.strerror or e}") from None
        if not _try_lock(fd):
            owner = _owner(fd)
            os.close(fd)
            raise UsageError(
                f"{what}: {path} is being written by another run ({owner}; lock file {lock.name}): "
                "wait for it to end, or choose another file"
            )
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(lock))
        except OSError:
            current = False
        if current:
            try:  # who holds it, for the message of a refused run; the lock is the system's
                os.ftruncate(fd, 0)
                os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
            except OSError:
                pass  # a full disk: the lock holds all the same
            return OutputLock(lock, fd)
        os.close(fd)  # its owner removed it as we opened it: take the new one
    raise UsageError(f"{what}: cannot take the lock file {lock}: other runs keep replacing it")


def remove_stale_locks(folder: Path, held: set[Path]) -> None:
    """Remove the lock files in ``folder`` that no live process holds; never raises. Those this
    process ``held`` are not even opened: where flock is emulated by POSIX locks (NFS),
    closing any descriptor of a file releases the process's lock on it."""
    try:
        entries = [e for e in os.scandir(folder) if e.name.endswith(LOCK_MARK) and e.name.startswith(".")]
    except OSError:
        return
    for entry in entries:
        if Path(entry.path) in held:
            continue
        try:
            fd = os.open(entry.path, os.O_RDWR)
        except OSError:
            continue
        if _try_lock(fd):
            OutputLock(Path(entry.path), fd).release()
        else:
            os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _owner(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 300).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return " ".join(text.split()) or "owner unknown"


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
