"""Writing files so that a reader, a crash or a full disk never sees half of one.

Every output goes to a temporary file in the target's folder (same filesystem, so the
final rename is atomic), is flushed to disk, optionally verified, then renamed over the
target. On any failure the temporary is removed and the old file is left as it was.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def ordinary_file_mode() -> int:
    """The mode ``open()`` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_replace(
    path: str | os.PathLike[str],
    produce: Callable[[Path], None],
    verify: Callable[[Path], None] | None = None,
    suffix: str = ".tmp",
) -> Path:
    """Call ``produce(tmp)`` to write a temporary file beside ``path``, ``verify(tmp)`` if
    given (raise to reject it), then rename it over ``path``. Returns ``path``."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, ordinary_file_mode())  # mkstemp makes it private; outputs are ordinary files
        produce(tmp)
        if verify is not None:
            verify(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write(
    path: str | os.PathLike[str],
    write: Callable[[BinaryIO], None],
    verify: Callable[[Path], None] | None = None,
) -> Path:
    """Atomically write ``path`` with ``write(file)``; the data is fsynced before the rename."""

    def produce(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())

    return atomic_replace(path, produce, verify)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write ``text`` as UTF-8 with ``\\n`` line ends."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda f: f.write(data))
