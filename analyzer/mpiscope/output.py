"""Files the CLI writes: all or nothing, and any failure is one UserError naming the file.

A regular file is written to a temporary file in the same directory, fsynced and renamed
over the target (`os.replace`), so a full disk, `ulimit -f` or Ctrl-C leaves either no
file or the old one, never half a report. A symlink's target is replaced, not the link.
A target that exists and is not a regular file (`/dev/null`, `/dev/full`, a FIFO from
`>(jq .)`) is a stream: it is written in place, since renaming over it would replace the
device node or pipe; `/dev/stdout` and `/dev/fd/N` are written through the descriptor.

CPython ignores SIGXFSZ, so a write beyond `ulimit -f` fails with EFBIG (an OSError)
instead of killing the process; it is reported like any other failed write.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

from mpiscope.errors import UserError


def cannot_write(path: Path | str, err: OSError) -> UserError:
    """`mpiscope: <path>: cannot write: No space left on device` (exit 2)."""
    return UserError(str(path), f"cannot write: {err.strerror or err}")


def make_parent(path: Path | str) -> None:
    """Create the directory `path` goes into (a report's output directory), or one
    UserError naming it."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise cannot_write(path, err) from None


_STD_FDS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_OWN_FD = re.compile(r"/(?:proc/(?:self|thread-self)|dev)/fd/(\d+)")


def own_fd(path: Path | str) -> int | None:
    """The descriptor `path` names in this process (`/dev/stdout`, `/dev/fd/3`,
    `/proc/self/fd/1`), else None. Such a path behind `> out.txt` resolves to a regular
    file; renaming over it, or reopening it (O_TRUNC), would lose what stdout already
    wrote, so it is written through the descriptor itself."""
    text = os.path.abspath(path)
    if text in _STD_FDS:
        return _STD_FDS[text]
    m = _OWN_FD.fullmatch(text) or re.fullmatch(rf"/proc/{os.getpid()}/fd/(\d+)", text)
    return int(m.group(1)) if m else None


def _is_stream(path: Path) -> bool:
    """An existing target that is not a regular file (device, FIFO, socket), or one of
    our own descriptors."""
    if own_fd(path) is not None:
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # absent (or unreadable): created as a regular file


def _write_fd(fd: int, data: bytes) -> None:
    for stream in (sys.stdout, sys.stderr):  # what they hold comes first
        if stream is not None:
            stream.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _target(path: Path) -> Path:
    """Where the bytes end up: a symlink's target is replaced, not the link itself."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _mode_for(path: Path) -> int:
    """The old file's permissions, else those a plain open() would give (mkstemp: 0600)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _temp_in(directory: Path, name: str) -> tuple[int, Path]:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    return fd, Path(tmp)


def check_writable(path: Path) -> None:
    """Refuse an output path now (before minutes of analysis) if a file cannot be created
    there: creates and removes a temporary file beside it, which also catches what
    os.access cannot see (root on /proc, a read-only file system)."""
    if path.is_dir():
        raise UserError(str(path), "is a directory; give a file name to write")
    if _is_stream(path):
        return  # a device or FIFO: only writing into it tells (and a FIFO would block)
    target = _target(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(str(path), f"cannot write: directory {parent} does not exist")
    try:
        fd, tmp = _temp_in(parent, target.name)
    except OSError as err:
        raise cannot_write(path, err) from None
    os.close(fd)
    tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """A temporary path to write `path`'s new content to (for writers that want a file
    name, e.g. Plotly's write_html); on normal exit it replaces `path`, on any exception
    it is removed and `path` is left as it was. OSError becomes a one-line UserError."""
    path = Path(path)
    if _is_stream(path):
        try:
            yield path
        except OSError as err:
            raise cannot_write(path, err) from None
        return
    target = _target(path)
    try:
        fd, tmp = _temp_in(target.parent if str(target.parent) else Path("."), target.name)
    except OSError as err:
        raise cannot_write(path, err) from None
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # the content must be on disk before the rename
            os.fchmod(f.fileno(), _mode_for(target))
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise cannot_write(path, err) from None
    except BaseException:  # Ctrl-C, a bug in the writer: still no half-written file
        tmp.unlink(missing_ok=True)
        raise
    _sync_dir(target.parent)


@contextlib.contextmanager
def scratch_path(path: Path | str) -> Iterator[Path]:
    """Like `atomic_path` (a reader never sees half a file, an exception leaves none) but
    nothing is synced: for scratch files that live for one analysis and that a retried
    task rewrites (syncing cost ~0.3 ms a file; a pass at a thousand ranks wrote 24k)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise cannot_write(path, err) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _sync_dir(directory: Path) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(directory if str(directory) else ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's process, alive
        return True
    return True


def _remove_stale_temps(target: Path) -> None:
    """Temporary directories of writers killed outright (SIGKILL, power loss): never a
    result, only clutter (in the user's trace directory). Only this host's: on a shared
    file system another node's writer is alive whatever our process table says."""
    here = socket.gethostname()
    for tmp in target.parent.glob(f"{target.name}.tmp*"):
        tail = tmp.name.rpartition(".tmp")[2]  # <pid>-<tag>@<host>, or <pid> (older)
        pid, host = tail.partition("-")[0], tail.rpartition("@")[2] if "@" in tail else here
        if (host == here and pid.isdigit() and int(pid) != os.getpid()
                and not _alive(int(pid))):
            shutil.rmtree(tmp, ignore_errors=True)


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux renameat2); False where the kernel, the C
    library or the file system cannot (then nothing was done)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def publish_dir(target: Path | str) -> Iterator[Path]:
    """An empty temporary directory beside `target` to build its new content in; on normal
    exit it takes `target`'s place (an old `target` directory is replaced), on any
    exception it is removed and `target` is left as it was: a half-built directory is
    never seen under `target`'s name.

    An old target is swapped with the new one in one step where Linux allows it
    (renameat2 RENAME_EXCHANGE: a reader sees the old directory or the new one, never
    neither), else renamed aside just before the new one is renamed in; then removed.
    The temporary name is `<target>.tmp<pid>-<random>@<host>`, unique per call (two
    threads or nodes may build the same target; the last one to finish wins); those of
    killed writers of this host are removed here. Exceptions are not translated (a cache
    that cannot be written is only slower for its callers, a report is an error for its
    caller)."""
    target = Path(target)
    _remove_stale_temps(target)
    tag, host = uuid.uuid4().hex[:8], socket.gethostname()
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}-{tag}@{host}")
    tmp.mkdir(parents=True)
    try:
        yield tmp
        if target.is_dir() and not target.is_symlink() and _exchange(tmp, target):
            pass  # tmp now holds the old content, removed below
        elif target.exists() or target.is_symlink():
            old = target.with_name(f"{target.name}.tmp{os.getpid()}-{tag}old@{host}")
            os.rename(target, old)
            try:
                os.rename(tmp, target)
            except BaseException:
                os.rename(old, target)  # put the old one back
                raise
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)
        else:
            os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_bytes(path: Path | str, data: bytes) -> None:
    fd = own_fd(path)
    if fd is not None:
        try:
            _write_fd(fd, data)
        except OSError as err:
            raise cannot_write(path, err) from None
        return
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def write_text(path: Path | str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))
