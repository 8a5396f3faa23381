"""OS faults named in words: a full disk, a quota, a permission, a read-only file system.

Libraries report these tersely or not at all: a Python write says ``[Errno 28] No space
left on device`` without the path, safetensors wraps it in ``Error while serializing``, and
torch's checkpoint writer says only ``basic_ios::clear: iostream error`` or ``[enforce fail
at inline_container.cc...]``. :func:`os_fault` turns such an error, given where the write
went, into an :class:`OSFault` that says what ran out where, with the free space and, where
the caller knows it, how much the write needed. An opaque writer failure counts as a full
disk only where the target's file system is (nearly) full.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

# The errno of a fault named in a message rather than in OSError.errno (safetensors,
# pyarrow's detail): "os error 28", "errno 28", or the C library's own words.
ERRNO_IN_MESSAGE = re.compile(r"(?:os error|errno)\s*(\d+)", re.IGNORECASE)
STRERROR_CODES = {
    os.strerror(code).lower(): code
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG)
}
# Writers that fail without saying why: torch's stream writer (its iostream, or its check of
# how much was written) and numpy's short write.
OPAQUE_WRITE_FAILURE = re.compile(
    r"basic_ios::clear|iostream error|inline_container\.cc|PytorchStreamWriter|requested and \d+ written"
)
# Without a known need, a file system with less free than this (or than 1% of its size,
# whichever is less) counts as full when an opaque writer failed on it.
NEARLY_FULL_BYTES = 64 * 1024**2


class OSFault(OSError):
    """An OS fault named in words: what failed, on which path, and why."""

    def __init__(self, code: int, sentence: str):
        super().__init__(code, sentence)
        self.sentence = sentence

    def __str__(self) -> str:
        return self.sentence


def os_fault(
    error: BaseException, paths: Iterable[str | os.PathLike] = (), what: str | None = None, need: int | None = None
) -> OSFault | None:
    """``error`` named in words as an :class:`OSFault`, or None where it is no OS fault.

    ``paths``: where the failing write went (the error's own file name comes first);
    ``what``: what was being written ("the model"); ``need``: its size in bytes, if known.
    """
    if isinstance(error, OSFault):
        return error
    try:
        return _named(error, paths, what, need)
    except OSError:
        # The path cannot even be looked at: leave the error as it was.
        return None


def _named(
    error: BaseException, paths: Iterable[str | os.PathLike], what: str | None, need: int | None
) -> OSFault | None:
    candidates = [Path(p) for p in ([error.filename] if getattr(error, "filename", None) else [])]
    candidates += [Path(p) for p in paths]
    if not candidates:
        return None
    code = _error_code(error)
    if code is None and OPAQUE_WRITE_FAILURE.search(str(error)):
        full = [p for p in candidates if _nearly_full(p, need)]
        if full:
            return OSFault(errno.ENOSPC, _no_space(full[0], what, need))
        return None
    if code in (errno.ENOSPC, errno.EDQUOT):
        # Without the error's file name, the fullest of the places written to.
        path = candidates[0] if getattr(error, "filename", None) else min(candidates, key=_free_bytes)
        if code == errno.ENOSPC:
            return OSFault(code, _no_space(path, what, need))
        return OSFault(
            code, f"disk quota exceeded on {_folder(path)}{_needs(what or str(path), need)} (see `quota` for the limit)"
        )
    path = candidates[0]
    writing = f"writing {what} to {path}" if what else f"writing {path}"
    if code in (errno.EACCES, errno.EPERM):
        return OSFault(code, f"permission denied {writing}: {_folder(path)} is not writable by this user")
    if code == errno.EROFS:
        return OSFault(code, f"read-only file system {writing}: {_mount_point(path)} is mounted read-only")
    if code == errno.EFBIG:
        return OSFault(
            code, f"file too large {writing}: over the file system's or this job's file size limit (`ulimit -f`)"
        )
    return None


@contextlib.contextmanager
def naming_os_faults(path: str | os.PathLike, what: str | None = None, need: int | None = None) -> Iterator[None]:
    """Within the block, an OS fault writing under ``path`` is raised as an :class:`OSFault`
    (chained to the original); any other error passes unchanged."""
    try:
        yield
    except Exception as error:
        fault = os_fault(error, [path], what, need)
        if fault is None or fault is error:
            raise
        raise fault from error


def folder_bytes(folder: str | os.PathLike) -> int:
    """The size of the files under ``folder``."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def _error_code(error: BaseException) -> int | None:
    code = getattr(error, "errno", None)
    if isinstance(code, int) and code in errno.errorcode:
        return code
    message = str(error)
    found = ERRNO_IN_MESSAGE.search(message)
    if found and int(found.group(1)) in errno.errorcode:
        return int(found.group(1))
    lowered = message.lower()
    return next((code for words, code in STRERROR_CODES.items() if words in lowered), None)


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing ancestor (a failed write may have left no file)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _folder(path: Path) -> Path:
    """The folder to name: ``path``'s own where it is one, else its parent, as given (relative
    paths stay relative, as the user wrote them)."""
    return path if path.is_dir() else path.parent


def _mount_point(path: Path) -> Path:
    path = _existing(path)
    device = path.stat().st_dev
    while path != path.parent and path.parent.stat().st_dev == device:
        path = path.parent
    return path


def _free_bytes(path: Path) -> int:
    usage = os.statvfs(_existing(path))
    return usage.f_bavail * usage.f_frsize


def _nearly_full(path: Path, need: int | None) -> bool:
    usage = os.statvfs(_existing(path))
    free, size = usage.f_bavail * usage.f_frsize, usage.f_blocks * usage.f_frsize
    return free < max(need or 0, min(NEARLY_FULL_BYTES, size // 100))


def _size(count: int) -> str:
    if count >= 1024**3:
        return f"{count / 1024**3:.1f} GB"
    return f"{count / 1024**2:.1f} MB" if count >= 1024**2 // 10 else f"{count / 1024:.0f} KB"


def _needs(what: str | None, need: int | None) -> str:
    if need is not None:
        return f", {what or 'the write'} needs ~{_size(need)}"
    return f", writing {what}" if what else ""


def _no_space(path: Path, what: str | None, need: int | None) -> str:
    folder, mount = _folder(path), _mount_point(path)
    on = f"{folder} (file system at {mount})" if Path(os.path.abspath(folder)) != mount else str(folder)
    return f"no space left on {on}: {_size(_free_bytes(path))} free{_needs(what or str(path), need)}"
