"""Every file geosched writes goes through here, so each promise below is kept in one place.

- **Never through a link.** The directories from the output root down to the file are opened one at a time
  with O_NOFOLLOW (openat), so a symlinked directory inside the tree is refused rather than followed out of it,
  and nothing can swap one in between a check and the write. The file itself is replaced by rename, which
  replaces a link at its name and never writes through it. The root is the caller's choice and may be a link.
- **Temp files beside their target**, named `.geosched-tmp.<name>.<pid>.<random>`: one .gitignore pattern
  (`IGNORE_PATTERN`, also matching the journal below) keeps them out of `git add -A`. Removed on every exit path
  a process lives through; the next write of the same target removes those of a killed process (its pid is gone).
- **Modes**: an existing file keeps its mode; a new one gets `mode` less the umask (`SHARED` 0644 for outputs
  others read, `PRIVATE` 0600 for the store and secrets).
- **Durable**: fsync the file, rename it into place, fsync the directory (and the parent of a new directory).

Sets of files that must agree (a snapshot's fleet and network, the GitOps tree and its index) go through
`commit`, a redo journal: every new file is staged as a temp file, then the journal naming them is renamed
into place (the commit point), then the temp files are renamed over their targets and the journal removed.
A run killed before the commit point leaves the old set (its temp files are removed by the next `recover`); a
run killed after it is finished by the next `recover`, which every writer and reader of a set calls first.
Why a journal and not a new directory swapped in: the GitOps tree shares its root with files geosched does
not own (the repository's README, Flux's `flux-system/`) and lives in Git, where a symlink swap would commit a
symlink; a rename cannot replace a non-empty directory (only Linux's renameat2 can exchange two), and a
snapshot directory may hold other files too. The journal works in place and costs one small file.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from geosched.errors import InputError

SHARED = 0o644
PRIVATE = 0o600
TMP_PREFIX = ".geosched-tmp."
JOURNAL = TMP_PREFIX + "journal"
IGNORE_PATTERN = TMP_PREFIX + "*"
# Room for the prefix, a pid and the random part within NAME_MAX (255).
_NAME_KEEP = 200


def write_file(path: Path, data: str | bytes, *, root: Path | None = None, mode: int = SHARED) -> None:
    """Replace `path` whole (readers see the old bytes or the new, never a mix). `root` is the output tree:
    directories between it and the file are created as needed and must not be links."""
    root = path.parent if root is None else root
    parts = _relative(root, path)
    with _directory(root, parts[:-1], create=True) as dfd:
        name = parts[-1]
        _sweep(dfd, name)
        tmp = _stage(dfd, name, _bytes(data), mode)
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            _unlink(dfd, tmp)
            raise
        os.fsync(dfd)


def commit(root: Path, files: Mapping[str, str | bytes], remove: Iterable[str] = (), *,
           mode: int = SHARED) -> None:
    """Write `files` and remove `remove` (paths relative to `root`) as one unit: see the module doc."""
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root):
        _recover(root)
        writes = [(rel, _tmp_name(Path(rel).name)) for rel in files]
        journal: dict[str, Any] = {"state": "staging", "write": writes, "remove": sorted(remove)}
        # Named before they exist: a run killed while staging leaves a journal that lists what to remove.
        write_file(root / JOURNAL, json.dumps(journal), mode=PRIVATE)
        try:
            for rel, tmp in writes:
                parts = _relative(root, root / rel)
                with _directory(root, parts[:-1], create=True) as dfd:
                    _stage(dfd, parts[-1], _bytes(files[rel]), mode, tmp=tmp)
        except BaseException:
            _recover(root)  # before the commit point: undo, the old set stays
            raise
        write_file(root / JOURNAL, json.dumps({**journal, "state": "commit"}), mode=PRIVATE)
        _finish(root, journal)


def recover(root: Path) -> bool:
    """Finish (or undo, if it never reached its commit point) a set a killed run left; True if there was one."""
    if not root.is_dir():
        return False
    with _directory(root, (), create=False) as dfd:
        _sweep(dfd, JOURNAL)  # a journal whose own write was killed
    if not (root / JOURNAL).exists():
        return False
    with _locked(root):
        return _recover(root)


def pending(root: Path) -> bool:
    """A killed run left a half-written set here (readers that may not write report it; `recover` repairs)."""
    return (root / JOURNAL).exists()


def _recover(root: Path) -> bool:
    try:
        journal = json.loads((root / JOURNAL).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        raise InputError(str(root / JOURNAL), "", f"cannot read the journal of an interrupted write: {exc}") from None
    if journal.get("state") == "commit":
        _finish(root, journal)
        return True
    for rel, tmp in journal.get("write", ()):
        parts = _relative(root, root / rel)
        # Not staged if its directory is missing or a link: nothing to remove there.
        with suppress(FileNotFoundError, InputError), _directory(root, parts[:-1], create=False) as dfd:
            _unlink(dfd, tmp)
    _drop_journal(root)
    return True


def _finish(root: Path, journal: Mapping[str, Any]) -> None:
    """Rename each staged file over its target and make the removals; idempotent (a target already renamed has
    no temp file left). An entry whose directory is gone or has become a link since is skipped: a journal that
    cannot finish would block every later run, and the next render or export writes the set again anyway."""
    for rel, tmp in journal.get("write", ()):
        parts = _relative(root, root / rel)
        with suppress(FileNotFoundError, InputError), _directory(root, parts[:-1], create=False) as dfd:
            os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
            os.fsync(dfd)
    for rel in journal.get("remove", ()):
        parts = _relative(root, root / rel)
        with suppress(FileNotFoundError, InputError), _directory(root, parts[:-1], create=False) as dfd:
            _unlink(dfd, parts[-1])
            os.fsync(dfd)
    _drop_journal(root)


def _drop_journal(root: Path) -> None:
    with _directory(root, (), create=False) as dfd:
        _unlink(dfd, JOURNAL)
        os.fsync(dfd)


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One writer of a set per root at a time: an flock on the root directory, released if the process dies."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _relative(root: Path, path: Path) -> tuple[str, ...]:
    parts = path.relative_to(root).parts
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise InputError(str(path), "", f"not a file inside the output tree {root}")
    return parts


@contextmanager
def _directory(root: Path, parts: Sequence[str], *, create: bool) -> Iterator[int]:
    """A descriptor of root/parts, reached without following a link below `root`."""
    if create:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                    os.fsync(fd)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    where = root.joinpath(*parts[:i + 1])
                    raise InputError(str(where), "", "is a symbolic link or not a directory; geosched does not write "
                                     "through links inside its output tree") from None
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _tmp_name(name: str) -> str:
    return f"{TMP_PREFIX}{name[:_NAME_KEEP]}.{os.getpid()}.{secrets.token_hex(4)}"


def _stage(dfd: int, name: str, data: bytes, mode: int, *, tmp: str | None = None) -> str:
    """`data` in a new temp file beside `name`, with `name`'s mode if it exists, flushed to disk."""
    tmp = tmp or _tmp_name(name)
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        keep = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
    except FileNotFoundError:
        keep = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode if keep is None else PRIVATE, dir_fd=dfd)
    try:
        try:
            if keep is not None:
                os.fchmod(fd, keep)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _unlink(dfd, tmp)
        raise
    return tmp


def _sweep(dfd: int, name: str) -> None:
    """Remove temp files of `name` that a killed process left (never a live one's: it may be mid-write)."""
    prefix = f"{TMP_PREFIX}{name[:_NAME_KEEP]}."
    for entry in os.listdir(dfd):
        if not entry.startswith(prefix):
            continue
        pid, _, tag = entry[len(prefix):].partition(".")  # exactly <pid>.<tag>: not another name's temp
        if pid.isdigit() and tag.isalnum() and not _alive(int(pid)):
            _unlink(dfd, entry)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _unlink(dfd: int, name: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dfd)


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data
