"""Writing an output file whole or not at all: into a temporary file beside it, renamed over
it once complete, so a killed run never leaves half a file. An existing target that is not a
regular file (`-o /dev/null`, `/dev/stdout`, a named pipe) is written in place: renaming over it
would replace the device with a file (as root, the machine's /dev/null)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gym_metrics.errors import GymMetricsError


def same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` name one file: by device and inode when both exist (so a symlink,
    a hard link or another relative spelling of the input is caught), else by resolved path."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return a.resolve() == b.resolve()
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_output(path: Path, flag: str = "--output") -> None:
    """Before any work: an output that can be written (its folder made if missing); a
    GymMetricsError naming `flag` otherwise (a directory, a folder not writable)."""
    if path.is_dir():
        raise GymMetricsError(f"{flag} {path} is a directory: name a file in it")
    if path.exists() and not stat.S_ISREG(path.stat().st_mode):
        return  # a device or pipe: written in place
    _writable(path.parent, f"cannot write {flag} {path}: its folder", f" {path.parent}")


def check_output_dir(path: Path, flag: str) -> None:
    """Before any work: a folder outputs can be written into (made if missing); a
    GymMetricsError naming `flag` otherwise (a file, a folder that cannot be made or written)."""
    if path.exists() and not path.is_dir():
        raise GymMetricsError(f"{flag} {path} is not a directory")
    _writable(path, f"cannot write into {flag} {path}: it", "")


def _writable(folder: Path, said: str, named: str) -> None:
    """`folder` made if missing and writable; else GymMetricsError `said` + what is wrong."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GymMetricsError(f"{said} cannot be made ({exc.strerror})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise GymMetricsError(f"{said}{named} is not writable")


_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})
"""What writing a file fails with, the file unnamed (the write's OSError carries no path)."""


@contextmanager
def written_atomically(path: str | os.PathLike[str]) -> Iterator[Path]:
    """The path to write `path`'s new content to; renamed over `path` when the block ends
    without an error, removed when it fails. Its folder is made if missing; the usual
    permissions (umask), unlike mkstemp's 0600."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise GymMetricsError(f"cannot write {path}: it is a directory")
    if mode is not None and not stat.S_ISREG(mode):
        with _naming(path):
            yield path
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with _naming(path):
            yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def _naming(path: Path) -> Iterator[None]:
    """A failed write (a full disk, `-o /dev/full`) named by the file it was writing."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno in _WRITE_ERRORS:
            raise GymMetricsError(f"cannot write {path}: {exc.strerror}") from exc
        raise


__all__ = ["check_output", "check_output_dir", "same_file", "written_atomically"]
