"""Every file geosched writes goes through here, so each promise below is kept in one place.

- **Never through a link.** The directories from the output root down to the file are opened one at a time
  with O_NOFOLLOW (openat), so a symlinked directory inside the tree is refused rather than followed out of it,
  and nothing can swap one in between a check and the write. The file itself is replaced by rename, which
  replaces a link at its name and never writes through it. The root is the caller's choice and may be a link.
- **Only files are replaced.** A name that holds a device, a FIFO or a socket, or a link to one or to a file
  descriptor (`--out /dev/null`, `--out /dev/stdout`), is refused (`InputError`, exit 2) and left as it is: the
  rename would replace it, and as root `--out /dev/full` replaced the machine's /dev/full with a file.
- **Temp files beside their target**, named `.geosched-tmp.<name>.<pid>.<8 hex>` (`temp_name`): one .gitignore
  pattern (`IGNORE_PATTERN`, also matching the journal below) keeps them out of `git add -A`. Removed on every
  exit path a process lives through; those of a killed process (its pid is gone) are swept by the next write
  of the same target, by every commit in the directories it writes, and by `recover`.
- **Modes**: an existing file keeps its mode; a new one gets `mode` less the umask (`SHARED` 0644 for outputs
  others read, `PRIVATE` 0600 for the store and secrets).
- **Durable**: fsync the file, rename it into place, fsync the directory (and the parent of a new directory).
- **Failures are one line**: an OSError while writing (read-only or full file system, no permission, a
  directory where a file goes, a name too long) is an `OutputError` naming the path and the cause (exit 1),
  what the path held before is left whole, and no directory the write created on the way is left.

Sets of files that must agree (a snapshot's fleet and network, the GitOps tree and its index) go through
`commit`, a redo journal: every new file is staged as a temp file, then the journal naming them is renamed
into place (the commit point), then the temp files are renamed over their targets and the journal removed.
A run killed before the commit point leaves the old set (its temp files are removed by the next writer); a
run killed after it is finished by the next writer (`recover`, which every writer of a set calls first). A run
that fails (a full disk half way, the committed journal itself not fitting, a directory in the way) takes back
everything it did: journal, temp files and the directories it created for them, so the tree holds the same
files with the same bytes as before it (`_abandon`).
Why a journal and not a new directory swapped in: the GitOps tree shares its root with files geosched does
not own (the repository's README, Flux's `flux-system/`) and lives in Git, where a symlink swap would commit a
symlink; a rename cannot replace a non-empty directory (only Linux's renameat2 can exchange two), and a
snapshot directory may hold other files too. The journal works in place and costs one small file.

**The journal is untrusted input.** It sits in a directory a pull request can fill (docs/security.md), so
recovery acts on a journal only if `commit` could have written it, word for word, for this set
(`parse_journal`): every target a relative path of plain names inside the directory (no `..`, no absolute
path, no `.git`, no temp name) and one of the files the set consists of (its `layout`: `fleet.yaml`, or
`clusters/*/*/*.yaml`, never `.git/config` or `jobs/x.yaml`); every temp name the one `temp_name` makes for
its target's name, with no separator, in the target's own directory. Anything else is foreign: one line
(exit 2), and nothing is touched. Even a journal of the right shape only ever makes recovery rename a
regular temp file over a file of the set in the same directory, or remove a file of the set; every directory
on the way is opened without following links; and where other tools' files fit the layout too (the GitOps
tree), the writer's `owned` must say an existing target is its own before it is replaced or removed.

**Readers never write.** A command that only reads a set (`gitops check`, `place --snapshot`, `snapshot
import`) calls `reading`, never `recover`: under a shared lock (so no writer commits meanwhile) it sees the old
set when an interrupted write never reached its commit point, and the new one when it did (a name the killed
run had not renamed yet is read from its staged temp file); the directory is left as it is for the next writer
to finish. A journal `commit` cannot have written is refused there too.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from geosched.core.errors import InputError, OutputError
from geosched.files.gate import Kind, file_type, parse_json, read_bytes_at

SHARED = 0o644
PRIVATE = 0o600
TMP_PREFIX = ".geosched-tmp."
JOURNAL = TMP_PREFIX + "journal"
# Whether the file `name` in the directory open as the int (`rel` below the root) is the writer's own.
Owned = Callable[[str, int, str], bool]
IGNORE_PATTERN = TMP_PREFIX + "*"
# Room for the prefix, a pid and the random part within NAME_MAX (255).
_NAME_KEEP = 200
# What follows `<prefix><name>.` in a temp name: a pid (at most 10 digits) and 4 random bytes in hex.
_PID_TAG = re.compile(r"([0-9]{1,10})\.[0-9a-f]{8}")
# Any temp name `temp_name` can make: the target's name (no "/" in a file name), the pid, the tag.
_ANY_TEMP = re.compile(r"\.geosched-tmp\.(.+)\.([0-9]{1,10})\.[0-9a-f]{8}", re.DOTALL)
_MAX_PATH = 4096
_NAME_MAX = 255


# --- single files ----------------------------------------------------------------------------------

def write_file(path: Path, data: str | bytes, *, root: Path | None = None, mode: int = SHARED) -> None:
    """Replace `path` whole (readers see the old bytes or the new, never a mix). `root` is the output tree:
    directories between it and the file are created as needed and must not be links."""
    root = path.parent if root is None else root
    parts = _relative(root, path)
    missing = _missing(root)
    made: list[tuple[str, ...]] = []
    try:
        with _failing(path), _directory(root, parts[:-1], create=True, made=made) as dfd:
            name = parts[-1]
            _only_a_file(dfd, name, path)
            _sweep(dfd, name)
            tmp = _stage(dfd, name, _bytes(data), mode)
            try:
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                _unlink(dfd, tmp)
                raise
            os.fsync(dfd)
    except BaseException:
        # A write that failed leaves no directory it made on the way (`up --out clusters/x/ml/job.yaml` on a full
        # disk): the tree is as it was. Each only while empty, deepest first, from the root down without links.
        _remove_made(root, made)
        for directory in missing:
            with suppress(OSError):
                directory.rmdir()
        raise


def _only_a_file(dfd: int, name: str, path: Path) -> None:
    """Refuse a `name` the rename would replace that is not a file (see the module's docstring). A directory is
    left to the rename's own error (exit 1, as before); a dangling link is replaced like a link to a file."""
    try:
        here = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    what: str | None = None
    if stat.S_ISLNK(here.st_mode):
        target = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), os.readlink(name, dir_fd=dfd)))
        # /dev/stdout and /dev/fd/N lead to /proc/<pid>/fd/N, a magic link to whatever the descriptor is (a pipe, a
        # terminal, or a file fd 1 was redirected to): never a file of the user's to replace.
        if target.startswith(("/proc/", "/dev/fd/")):
            what = "a link to a file descriptor"
        else:
            try:
                there = os.stat(name, dir_fd=dfd)
            except OSError:
                return
            if not (stat.S_ISREG(there.st_mode) or stat.S_ISDIR(there.st_mode)):
                what = f"a link to {file_type(there.st_mode)}"
    elif not (stat.S_ISREG(here.st_mode) or stat.S_ISDIR(here.st_mode)):
        what = file_type(here.st_mode)
    if what is not None:
        raise InputError(str(path), "", f"{what}, not a file: geosched writes a file whole (a temp file renamed "
                         "over it), which would replace it; name a file")


def temp_name(name: str) -> str:
    """A fresh temp name beside the file `name`; the only shape recovery and the sweeps accept."""
    return f"{TMP_PREFIX}{name[:_NAME_KEEP]}.{os.getpid()}.{secrets.token_hex(4)}"


def temp_pid(entry: str, name: str | None = None) -> int | None:
    """The pid in `entry` if `temp_name` could have made it (for the file `name`, when given); else None."""
    if name is not None:
        prefix = f"{TMP_PREFIX}{name[:_NAME_KEEP]}."
        own = _PID_TAG.fullmatch(entry, len(prefix)) if entry.startswith(prefix) else None
        return None if own is None else int(own.group(1))
    match = _ANY_TEMP.fullmatch(entry)
    return None if match is None or "/" in match.group(1) else int(match.group(2))


# --- sets of files ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Journal:
    """What an interrupted `commit` promised: each target with the temp file staged beside it, the removals."""

    committed: bool
    write: tuple[tuple[str, str], ...]
    remove: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps({"state": "commit" if self.committed else "staging",
                           "write": [list(w) for w in self.write], "remove": list(self.remove)})


class ForeignJournal(InputError):
    """A journal `commit` cannot have written: reported, never acted on."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(str(path), "", f"not a journal geosched wrote ({why}); nothing was touched: if no "
                         "geosched command is writing here, remove it")


def commit(root: Path, files: Mapping[str, str | bytes], remove: Iterable[str] = (), *, layout: Sequence[str],
           mode: int = SHARED, owned: Owned | None = None) -> None:
    """Write `files` and remove `remove` (paths relative to `root`, each one of the `layout` patterns of the set:
    `*` stands for part of one name) as one unit: see the module doc. `owned` as for `recover`."""
    _make_root(root)
    with _failing(root), _locked(root, exclusive=True) as rfd:  # _failing: what no step below names more closely
        _recover(root, rfd, layout, owned)
        targets = {rel: _relative(root, root / rel) for rel in files}
        for rel in [*files, *remove]:
            _relative(root, root / rel)
            if not in_layout(rel, layout):
                raise ValueError(f"{rel!r} is not a file of this set ({', '.join(layout)})")
        journal = Journal(False, tuple((rel, temp_name(parts[-1])) for rel, parts in targets.items()),
                          tuple(sorted(remove)))
        # Named before they exist: a run killed while staging leaves a journal that lists what to remove.
        _write_journal(root, journal)
        swept: set[tuple[str, ...]] = set()
        made: list[tuple[str, ...]] = []
        try:
            for rel, tmp in journal.write:
                parts = targets[rel]
                with _failing(root / rel), _directory(root, parts[:-1], create=True, made=made) as dfd:
                    if parts[:-1] not in swept:  # once per directory: a tree may hold thousands of files
                        swept.add(parts[:-1])
                        _sweep(dfd)
                    _refuse_directory(dfd, parts[-1], root / rel)
                    _stage(dfd, parts[-1], _bytes(files[rel]), mode, tmp=tmp)
            # The commit point. Inside the `try`: on a full disk this small write is as likely to fail as any.
            _write_journal(root, Journal(True, journal.write, journal.remove))
        except BaseException:
            with suppress(OSError, InputError):
                _abandon(root, journal, made)  # the old set stays, and nothing of this run beside it
            raise
        _finish(root, journal)


def recover(root: Path, *, layout: Sequence[str], sweep: Sequence[str] = (), owned: Owned | None = None) -> bool:
    """For writers only: finish (or undo, if it never reached its commit point) a set of this `layout` a killed
    run left, and remove the temp files of dead processes in `root` and every directory below the
    subdirectories `sweep` names. True if there was a set to finish or undo. A foreign journal raises
    ForeignJournal. With `owned`, for a set whose layout other tools' files match too (the GitOps tree's
    `clusters/*/*/*.yaml` holds Flux's `flux-system/`), a journal's entry replaces or removes an existing target
    only if `owned(rel, dir_fd, name)` says the writer's own file is there: a journal of the right shape may still
    be planted, and its names are then the planter's choice."""
    if not root.is_dir():
        return False
    with _failing(root), _locked(root, exclusive=True) as rfd:
        found = _recover(root, rfd, layout, owned)
        _sweep(rfd)
        for below in sweep:
            _sweep_tree(rfd, below)
        return found


def pending(root: Path) -> bool:
    """Something named like a journal is here: a killed run left a half-written set, or it was planted."""
    return os.path.lexists(root / JOURNAL)


class View:
    """A set as a reader sees it (see `reading`)."""

    def __init__(self, root: Path, journal: Journal | None) -> None:
        self.root = root
        self.journal = journal
        self._staged = dict(journal.write) if journal is not None and journal.committed else {}
        self._removed = set(journal.remove) if journal is not None and journal.committed else set()

    @property
    def interrupted(self) -> bool:
        return self.journal is not None

    def path(self, rel: str) -> Path | None:
        """Where `rel` reads from now, or None if the set has no such file."""
        plain = self.root / rel
        if rel in self._removed:
            return None
        tmp = self._staged.get(rel)
        if tmp is not None and _regular_below(self.root, plain.with_name(tmp)):
            return plain.with_name(tmp)
        return plain if plain.exists() else None


@contextmanager
def reading(root: Path, *, layout: Sequence[str]) -> Iterator[View]:
    """The set of this `layout` in `root` for a reader, held steady while the caller reads it; never writes
    (module doc)."""
    if not root.is_dir():
        yield View(root, None)
        return
    try:
        rfd = _lock(root, exclusive=False)
    except OSError as exc:
        raise InputError(str(root), "", f"cannot read: {exc.strerror or exc}") from None
    try:
        yield View(root, _load_journal(root, rfd, layout))
    finally:
        os.close(rfd)


def in_layout(rel: str, layout: Sequence[str]) -> bool:
    """`rel` is one of the paths the patterns describe (`*` and `?` within one name, never across a `/`)."""
    parts = rel.split("/")
    return any(len(pattern) == len(parts) and all(map(fnmatchcase, parts, pattern))
               for pattern in (p.split("/") for p in layout))


def parse_journal(data: bytes, path: Path, layout: Sequence[str]) -> Journal:
    """The journal, if `commit` could have written it word for word for a set of this `layout`; else
    ForeignJournal."""
    try:
        doc = parse_json(data.decode("utf-8"), str(path))
    except UnicodeDecodeError:
        raise ForeignJournal(path, "not UTF-8") from None
    except InputError as exc:
        raise ForeignJournal(path, exc.reason) from None
    if not isinstance(doc, dict) or set(doc) != {"state", "write", "remove"}:
        raise ForeignJournal(path, "expected an object of state, write and remove")
    if doc["state"] not in ("staging", "commit"):
        raise ForeignJournal(path, "state is neither staging nor commit")
    write, remove = doc["write"], doc["remove"]
    if not isinstance(write, list) or not isinstance(remove, list):
        raise ForeignJournal(path, "write and remove must be lists")
    seen: set[str] = set()
    for entry in write:
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)):
            raise ForeignJournal(path, "each write must be a [target, temp file] pair of names")
        rel, tmp = entry
        _check_target(path, rel, seen, layout)
        if temp_pid(tmp, rel.rsplit("/", 1)[-1]) is None:
            raise ForeignJournal(path, f"{tmp!r} is not a temp name geosched makes for {rel!r}")
    for rel in remove:
        if not isinstance(rel, str):
            raise ForeignJournal(path, "each removal must be a name")
        _check_target(path, rel, seen, layout)
    return Journal(doc["state"] == "commit", tuple((str(r), str(t)) for r, t in write), tuple(map(str, remove)))


def _check_target(path: Path, rel: str, seen: set[str], layout: Sequence[str]) -> None:
    parts = rel.split("/")
    # `.git` in any case: Git's own metadata is nobody's output (Git refuses such a path in a tree too).
    if (len(rel) > _MAX_PATH or "\0" in rel or any(p in ("", ".", "..") or p.startswith(TMP_PREFIX)
                                                     or p.lower() == ".git"
                                                     or len(p.encode("utf-8", "surrogatepass")) > _NAME_MAX
                                                     for p in parts)):
        raise ForeignJournal(path, f"{rel!r} is not a file inside the directory")
    if not in_layout(rel, layout):
        raise ForeignJournal(path, f"{rel!r} is not one of the files this set consists of")
    if rel in seen:
        raise ForeignJournal(path, f"{rel!r} is named twice")
    seen.add(rel)


def _load_journal(root: Path, rfd: int, layout: Sequence[str]) -> Journal | None:
    path = root / JOURNAL
    try:
        os.stat(JOURNAL, dir_fd=rfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    try:
        data = read_bytes_at(rfd, JOURNAL, Kind.JOURNAL, str(path))
    except InputError as exc:
        raise ForeignJournal(path, exc.reason) from None
    return parse_journal(data, path, layout)


def _recover(root: Path, rfd: int, layout: Sequence[str], owned: Owned | None) -> bool:
    _sweep(rfd, JOURNAL)  # a journal whose own write was killed
    journal = _load_journal(root, rfd, layout)
    if journal is None:
        return False
    if journal.committed:
        _finish(root, journal, owned)
    else:
        with _failing(root / JOURNAL):
            _undo(root, journal)
    return True


def _write_journal(root: Path, journal: Journal) -> None:
    write_file(root / JOURNAL, journal.to_json(), mode=PRIVATE)


def _undo(root: Path, journal: Journal) -> None:
    """Remove what a run that never reached its commit point staged; the targets are left as they are."""
    for rel, tmp in journal.write:
        with _in_directory(root, rel) as dfd:
            if dfd is not None and _kind(dfd, tmp) in (stat.S_IFREG, stat.S_IFLNK):
                _unlink(dfd, tmp)
    _drop_journal(root)


def _abandon(root: Path, journal: Journal, made: Sequence[tuple[str, ...]]) -> None:
    """Take back a `commit` of this process that failed (a full disk, a directory in the way): the tree is left as
    it was before it, file for file. The journal goes first: if the failure came after the committed journal
    reached the disk (its directory's fsync failed), removing a temp file before it would let the next writer
    finish a set with files missing; if the journal cannot be removed, nothing else is touched and the next writer
    finishes or undoes the set whole. Then the temp files, then the directories this run created for them
    (deepest first, each only while empty: another file in it now is someone else's)."""
    _drop_journal(root)
    _undo(root, journal)
    _remove_made(root, made)


def _remove_made(root: Path, made: Sequence[tuple[str, ...]]) -> None:
    """Remove the directories below `root` a failed write created, deepest first, each only while empty (a file in
    it now is someone else's), reached without following links. The root itself stays: a writer of a set holds
    its lock on it, and a second writer waiting for that lock would go on in a removed directory."""
    for parts in sorted(made, key=len, reverse=True):
        with _in_directory(root, "/".join(parts)) as dfd:
            if dfd is not None:
                with suppress(OSError):
                    os.rmdir(parts[-1], dir_fd=dfd)
                    os.fsync(dfd)


def _missing(root: Path) -> list[Path]:
    """`root` and those of its parents that do not exist yet, deepest first: what creating it would make."""
    out: list[Path] = []
    here = root
    while not os.path.lexists(here) and here != here.parent:
        out.append(here)
        here = here.parent
    return out


def _finish(root: Path, journal: Journal, owned: Owned | None = None) -> None:
    """Rename each staged file over its target and make the removals; idempotent (a target already renamed has
    no temp file left). An entry that cannot be finished (its directory is gone or has become a link, its
    target has become a directory, its temp file is not a regular file, its target exists and `owned` says it is
    not the writer's) is skipped: a journal that cannot finish would block every later run, and the next render or
    export writes the set again anyway."""
    for rel, tmp in journal.write:
        with _failing(root / rel), _in_directory(root, rel) as dfd:
            if dfd is None:
                continue
            name = rel.rsplit("/", 1)[-1]
            kind = _kind(dfd, tmp)
            if kind != stat.S_IFREG or _kind(dfd, name) == stat.S_IFDIR or _foreign(dfd, name, rel, owned):
                if kind in (stat.S_IFREG, stat.S_IFLNK):
                    _unlink(dfd, tmp)
                continue
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            os.fsync(dfd)
    for rel in journal.remove:
        with _failing(root / rel), _in_directory(root, rel) as dfd:
            if (dfd is not None and _kind(dfd, rel.rsplit("/", 1)[-1]) in (stat.S_IFREG, stat.S_IFLNK)
                    and not _foreign(dfd, rel.rsplit("/", 1)[-1], rel, owned)):
                _unlink(dfd, rel.rsplit("/", 1)[-1])
                os.fsync(dfd)
    with _failing(root / JOURNAL):
        _drop_journal(root)


def _foreign(dfd: int, name: str, rel: str, owned: Owned | None) -> bool:
    return owned is not None and _kind(dfd, name) is not None and not owned(rel, dfd, name)


def _drop_journal(root: Path) -> None:
    with _directory(root, (), create=False) as dfd:
        _unlink(dfd, JOURNAL)
        os.fsync(dfd)


@contextmanager
def _in_directory(root: Path, rel: str) -> Iterator[int | None]:
    """The directory of `rel`, or None if it cannot be opened (gone, a link, not a directory, a name too long, no
    permission): nothing was staged there, or nothing can be done there now."""
    try:
        dfd = _walk(root, rel.split("/")[:-1], create=False)
    except (OSError, _LinkOnTheWay):
        yield None
        return
    try:
        yield dfd
    finally:
        os.close(dfd)


def _kind(dfd: int, name: str) -> int | None:
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None


def _regular_below(root: Path, path: Path) -> bool:
    """A regular file, reached from `root` without a link."""
    try:
        parts = path.relative_to(root).parts
        with _directory(root, parts[:-1], create=False) as dfd:
            return _kind(dfd, parts[-1]) == stat.S_IFREG
    except (ValueError, OSError, _LinkOnTheWay):
        return False


def _refuse_directory(dfd: int, name: str, path: Path) -> None:
    """A directory where a file goes cannot be replaced: said before the commit point, so nothing changes."""
    if _kind(dfd, name) == stat.S_IFDIR:
        raise OutputError(str(path), "is a directory, where geosched writes a file")


@contextmanager
def _locked(root: Path, *, exclusive: bool) -> Iterator[int]:
    fd = _lock(root, exclusive=exclusive)
    try:
        yield fd
    finally:
        os.close(fd)


def _lock(root: Path, *, exclusive: bool) -> int:
    """One writer of a set per root at a time, and no writer while a reader reads: an flock on the root
    directory (exclusive for writers, shared for readers), released when the descriptor is closed or the
    process dies. Returns the root's descriptor."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make_root(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # exist_ok covers directories only
        raise OutputError(str(root), "exists and is not a directory") from None
    except OSError as exc:
        raise OutputError(str(exc.filename or root), _cause(exc)) from None


def _relative(root: Path, path: Path) -> tuple[str, ...]:
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = ()
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise InputError(str(path), "", f"not a file inside the output tree {root}")
    return parts


class _LinkOnTheWay(InputError):
    pass


@contextmanager
def _directory(root: Path, parts: Sequence[str], *, create: bool,
               made: list[tuple[str, ...]] | None = None) -> Iterator[int]:
    """A descriptor of root/parts, reached without following a link below `root`; the directories it creates
    are added to `made`."""
    fd = _walk(root, parts, create=create, made=made)
    try:
        yield fd
    finally:
        os.close(fd)


def _walk(root: Path, parts: Sequence[str], *, create: bool, made: list[tuple[str, ...]] | None = None) -> int:
    if create:
        _make_root(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            where = root.joinpath(*parts[:i + 1])
            if create:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                    if made is not None:
                        made.append(tuple(parts[:i + 1]))
                    os.fsync(fd)
                except FileExistsError:
                    pass
                except OSError as exc:
                    raise OutputError(str(where), _cause(exc)) from None
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _LinkOnTheWay(str(where), "", "is a symbolic link or not a directory; geosched does not "
                                        "write through links inside its output tree") from None
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def _failing(path: Path) -> Iterator[None]:
    """An OSError while writing `path` becomes an OutputError naming it (the first path a step failed on)."""
    try:
        yield
    except OSError as exc:
        raise OutputError(str(path), _cause(exc)) from None


def _cause(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _stage(dfd: int, name: str, data: bytes, mode: int, *, tmp: str | None = None) -> str:
    """`data` in a new temp file beside `name`, with `name`'s mode if it exists, flushed to disk."""
    tmp = tmp or temp_name(name)
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


def _sweep(dfd: int, name: str | None = None) -> None:
    """Remove temp files (of `name`, or of any file) that a killed process left in this directory; never a
    live one's (it may be mid-write), never anything `temp_name` cannot have made, never a directory.
    Best effort: a file that cannot be removed (a read-only file system) is left for the next run."""
    for entry in os.listdir(dfd):
        pid = temp_pid(entry, name)
        if pid is not None and not _alive(pid) and _kind(dfd, entry) in (stat.S_IFREG, stat.S_IFLNK):
            with suppress(OSError):
                os.unlink(entry, dir_fd=dfd)


def _sweep_tree(rfd: int, below: str) -> None:
    """`_sweep` in `below` and every directory under it, links not followed (os.fwalk opens each by descriptor)."""
    if _kind(rfd, below) != stat.S_IFDIR:
        return
    for _, _, _, dfd in os.fwalk(below, dir_fd=rfd, follow_symlinks=False):
        _sweep(dfd)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: a pid no process can have
        return False
    except PermissionError:
        return True
    return True


def _unlink(dfd: int, name: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dfd)


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data

