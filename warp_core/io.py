"""Writing files so that a reader, a crash, a signal or a full disk never sees half of one.

Every output goes to a temporary file in the target's folder (same filesystem, so the
final rename is atomic), is flushed to disk, verified, then renamed over the target. On
any failure the temporary is removed and the old file is left as it was.
Files that belong together (a scene and the caches it plays) are all written and verified
first, then renamed one after another (:func:`commit_temporaries`); a failed rename puts
back the files already replaced.

Temporaries are named ``.<target>.fit-tmp-<host>-<pid>-<token><suffix>`` so that one left
behind by a process killed outright (SIGKILL, power loss) is recognisable: it is never
taken for an output, and :func:`remove_stale_temporaries` deletes those whose process (on
this host) is gone.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import socket
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO

from .errors import UserError

TEMP_MARK = ".fit-tmp-"
# Blender saves through "<file>@" and renames it; a kill in between leaves that one too
_TEMP_NAME = re.compile(
    r"^\.(?P<target>.+)" + re.escape(TEMP_MARK) + r"(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[0-9a-z]+(\.\w+)?@?$"
)


class OutputPathError(UserError, ValueError):
    """An output path that must not be written (not a regular file, the input, a folder
    that does not exist or cannot be written); nothing has been written."""


def _host_tag() -> str:
    # a shared folder on a farm sees temporaries of many hosts: only this host's pids are checked
    return hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def temporary_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Path:
    """A fresh temporary beside ``path`` (not created), recognisable by :func:`is_temporary`."""
    path = Path(path)
    token = secrets.token_hex(4)
    return path.with_name(f".{path.name}{TEMP_MARK}{_host_tag()}-{os.getpid()}-{token}{suffix}")


def is_temporary(name: str) -> bool:
    """True for the name of a temporary of :func:`atomic_replace` (or Blender's partial save of one)."""
    return _TEMP_NAME.match(name) is not None


def _process_gone(pid: int) -> bool:
    if os.name != "posix":  # os.kill(pid, 0) terminates the process on Windows: never ask
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by someone else
        return False
    return False


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporaries in ``folder`` left by processes of this host that no longer
    run; returns what was removed. Never raises."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    host = _host_tag()
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None or match["host"] != host or int(match["pid"]) == os.getpid():
            continue
        if _process_gone(int(match["pid"])) and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
            except OSError:
                pass
    return removed


# -- checking output paths before any work --------------------------------------------------------


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_output_file(value: str | os.PathLike[str], what: str) -> Path:
    """The absolute path (symlinks resolved) of an output file ``value``: absent or a regular
    file, in an existing folder this process can write. OutputPathError otherwise."""
    path = Path(value).expanduser().resolve()
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise OutputPathError(f"{what}: cannot use {path}: {e.strerror or e}") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputPathError(f"{what}: {path} is {_kind(mode)}; outputs must be regular files")
    if not path.parent.is_dir():
        raise OutputPathError(f"{what}: folder {path.parent} does not exist")
    check_writable_folder(path.parent, what)
    return path


def check_output_folder(value: str | os.PathLike[str], what: str) -> Path:
    """The absolute path of an output folder ``value``: an existing writable folder, or a
    missing one whose nearest existing parent is a writable folder (it is made later)."""
    path = Path(value).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{what}: {path} is a file, not a folder")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise OutputPathError(f"{what}: cannot make {path}: {existing} is a file, not a folder")
    check_writable_folder(existing, what)
    return path


def check_writable_folder(folder: Path, what: str) -> None:
    """Create and remove a temporary in ``folder``: the only test that holds for root, for
    read-only mounts and for network shares alike."""
    probe = temporary_path(folder / "probe")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        raise OutputPathError(f"{what}: cannot write in {folder}: {e.strerror or e}") from None
    os.close(fd)
    os.unlink(probe)


def same_file(a: Path | None, b: Path | None) -> bool:
    """Whether two resolved paths name one file (the same path, or hard links of one file)."""
    if a is None or b is None:
        return False
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# -- writing -------------------------------------------------------------------------------------------


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY if directory else os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_temporary(
    path: str | os.PathLike[str],
    produce: Callable[[Path], None],
    verify: Callable[[Path], None] | None = None,
    suffix: str = ".tmp",
    *,
    create: bool = True,
) -> Path:
    """Call ``produce(tmp)`` to write a temporary beside ``path`` (created empty first unless
    ``create`` is False), fsync it and ``verify(tmp)`` (raise to reject it). Returns the
    temporary, for :func:`commit_temporaries`; on any exception, signals included, it is
    removed and ``path`` is left as it was."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        # renaming over a FIFO or a device would replace the node itself
        raise OSError(errno.EINVAL, f"{path} is {_kind(mode)}, not a regular file")
    tmp = temporary_path(path, suffix)
    try:
        if create:
            # 0o666 less the umask, as open() would make it: outputs are ordinary files
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        produce(tmp)
        if not tmp.is_file():
            raise OSError(errno.EIO, f"nothing was written to {tmp}")
        _fsync_path(tmp)
        if verify is not None:
            verify(tmp)
    except BaseException:
        discard_temporaries([tmp])
        raise
    return tmp


def discard_temporaries(temporaries: Iterable[Path]) -> None:
    """Remove temporaries (and Blender's partial save of each); never raises."""
    for tmp in temporaries:
        for leftover in (tmp, tmp.with_name(tmp.name + "@")):
            try:
                leftover.unlink(missing_ok=True)
            except OSError:
                pass


def _keep_previous(path: Path) -> Path | None:
    """A hard link to the file at ``path`` under a temporary name, to put back if a later
    rename of the same commit fails; None when there is no file (or no link can be made)."""
    keep = temporary_path(path, ".keep")
    try:
        os.link(path, keep)
    except OSError:
        return None
    return keep


def commit_temporaries(
    pairs: Sequence[tuple[Path, Path]], before_commit: Callable[[], None] | None = None
) -> None:
    """Rename each verified temporary over its target, in order, as one change: first
    ``before_commit()`` (raise to abandon it); if a rename fails, the targets already
    replaced get their previous files back (or are removed where there was none). On any
    exception every temporary is removed and the exception propagates."""
    done: list[tuple[Path, Path | None, bool]] = []  # (target, its previous file, it existed)
    try:
        if before_commit is not None:
            before_commit()
        for tmp, path in pairs:
            existed = path.exists()
            keep = _keep_previous(path) if existed and len(pairs) > 1 else None
            done.append((path, keep, existed))
            os.replace(tmp, path)
    except BaseException:
        for path, keep, existed in reversed(done):
            try:
                if keep is not None:
                    os.replace(keep, path)
                elif not existed:
                    path.unlink(missing_ok=True)
            except OSError:
                pass
        discard_temporaries(tmp for tmp, _ in pairs)
        raise
    discard_temporaries(keep for _, keep, _ in done if keep is not None)
    for folder in dict.fromkeys(path.parent for _, path in pairs):
        try:
            _fsync_path(folder, directory=True)  # the renames themselves reach the disk
        except OSError:
            pass  # not supported for folders everywhere (Windows); the files themselves are synced


def atomic_replace(
    path: str | os.PathLike[str],
    produce: Callable[[Path], None],
    verify: Callable[[Path], None] | None = None,
    suffix: str = ".tmp",
    *,
    create: bool = True,
    before_commit: Callable[[], None] | None = None,
    together: Sequence[tuple[Path, Path]] = (),
) -> Path:
    """Call ``produce(tmp)`` to write a temporary beside ``path`` (created empty first unless
    ``create`` is False), fsync it, ``verify(tmp)`` (raise to reject it), call
    ``before_commit()`` (raise to abandon the write), then rename it over ``path``, after the
    verified temporaries ``together`` (temporary, target) and as one change with them
    (:func:`commit_temporaries`). Returns ``path``. On any exception, signals included, every
    temporary is removed and ``path`` is left as it was."""
    path = Path(path)
    try:
        tmp = write_temporary(path, produce, verify, suffix, create=create)
    except BaseException:
        discard_temporaries(t for t, _ in together)
        raise
    commit_temporaries([*together, (tmp, path)], before_commit)
    return path


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write(
    path: str | os.PathLike[str],
    write: Callable[[BinaryIO], None],
    verify: Callable[[Path], None] | None = None,
    *,
    before_commit: Callable[[], None] | None = None,
) -> Path:
    """Atomically write ``path`` with ``write(file)``; the data is fsynced before the rename."""

    def produce(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            write(f)

    return atomic_replace(path, produce, verify, before_commit=before_commit)


def stage_bytes(
    path: str | os.PathLike[str], data: bytes, verify: Callable[[bytes], None] | None = None
) -> Path:
    """A verified temporary beside ``path`` holding ``data`` (read back, then ``verify(data
    read back)``, if given), for :func:`commit_temporaries`; ``path`` is not touched."""

    def produce(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def check(tmp: Path) -> None:
        back = tmp.read_bytes()
        if back != data:
            raise OSError(errno.EIO, f"{tmp} reads back {len(back)} bytes, {len(data)} were written")
        if verify is not None:
            verify(back)

    return write_temporary(path, produce, check)


def atomic_write_bytes(
    path: str | os.PathLike[str],
    data: bytes,
    verify: Callable[[bytes], None] | None = None,
    *,
    before_commit: Callable[[], None] | None = None,
) -> Path:
    """Atomically write ``data``; the temporary is read back and must hold exactly ``data``
    (then ``verify(data read back)``, if given) before it replaces ``path``."""
    path = Path(path)
    commit_temporaries([(stage_bytes(path, data, verify), path)], before_commit)
    return path


def atomic_write_text(
    path: str | os.PathLike[str],
    text: str,
    *,
    before_commit: Callable[[], None] | None = None,
) -> Path:
    """Atomically write ``text`` as UTF-8 with ``\\n`` line ends."""
    return atomic_write_bytes(path, text.encode("utf-8"), before_commit=before_commit)
