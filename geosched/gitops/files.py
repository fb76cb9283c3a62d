"""The tree on disk: which files geosched owns there, and bringing them in line with a rendered tree.

Owned, and so rewritten or removed: `placements.yaml`, `.gitignore`, `clusters/*/README.md` and
`clusters/*/*/*.yaml` that geosched wrote (they carry its marker). Anything else is left alone: the
repository's own files (its own `.gitignore` at the root is kept, and geosched's is then not written), and
files other tools keep in the same places (Flux bootstrap writes `clusters/<name>/flux-system/*.yaml`). A
file whose bytes are already right is not touched (its mtime stays). The changes are committed as one unit
(geosched.files.writes.commit): a render killed half way is finished or undone by the next one, and `check` says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from geosched.core.errors import InputError
from geosched.files import writes
from geosched.files.gate import Kind, read_bytes, read_bytes_at
from geosched.gitops.index import INDEX
from geosched.gitops.plan import CLUSTERS_DIR
from geosched.gitops.tree import GITIGNORE, README
from geosched.kube.provenance import DIGEST

OWNED_PATTERNS = (INDEX, GITIGNORE, f"{CLUSTERS_DIR}/*/{README}", f"{CLUSTERS_DIR}/*/*/*.yaml")
# Every file geosched writes holds one of these: the index and READMEs name the command, manifests the digest.
MARKERS = (b"geosched gitops render", DIGEST.encode())


@dataclass(frozen=True)
class Changes:
    """How a rendered tree differs from the one on disk, by relative path."""

    written: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: int

    @property
    def clean(self) -> bool:
        return not self.written and not self.removed


@dataclass(frozen=True)
class OnDisk:
    owned: dict[str, bytes]
    """geosched's files, by relative path."""
    foreign: frozenset[str]
    """Files where geosched's could be, that another tool or a person wrote."""


def read_tree(out_dir: Path) -> OnDisk:
    owned: dict[str, bytes] = {}
    foreign: set[str] = set()
    for pattern in OWNED_PATTERNS:
        for path in sorted(out_dir.glob(pattern)):
            if not _plain(path, out_dir):
                continue
            name = path.relative_to(out_dir).as_posix()
            # Through the gate: a tree may come from a pull request, and a 3 GiB sparse file there is refused
            # by its size before a byte of it is read.
            data = read_bytes(path, Kind.INDEX if name == INDEX else Kind.MANIFEST)
            if any(marker in data for marker in MARKERS):
                owned[name] = data
            else:
                foreign.add(name)
    return OnDisk(owned, frozenset(foreign))


def owned_at(rel: str, dir_fd: int, name: str) -> bool:
    """The tree's file `rel` (`name` in the directory open as `dir_fd`) is geosched's by the rule `read_tree`
    applies: a regular file, reached without a link, holding a marker. What recovering a journal replaces or
    removes must be (geosched.files.writes.recover): the journal may be planted, and Flux's
    `clusters/<name>/flux-system/*.yaml` matches the tree's layout."""
    try:
        data = read_bytes_at(dir_fd, name, Kind.INDEX if rel == INDEX else Kind.MANIFEST, rel)
    except InputError:  # a link, a FIFO, a directory, too large: not a file geosched wrote
        return False
    return any(marker in data for marker in MARKERS)


def _plain(path: Path, root: Path) -> bool:
    """A regular file reached without a symlink below `root`: the tree holds plain files, and a link could
    lead out of it (a removal would then delete something else; a write is refused by geosched.files.writes)."""
    if not path.is_file():
        return False
    here = path
    while here != root:
        if here.is_symlink():
            return False
        here = here.parent
    return True


def compare(files: Mapping[str, str], on_disk: OnDisk) -> Changes:
    clash = sorted(set(files) & on_disk.foreign)
    if clash:
        raise InputError(clash[0], "", "geosched would write this file, but it holds something geosched did not "
                         "write; move it away (or rename the job, namespace or cluster)")
    existing = on_disk.owned
    written = tuple(sorted(path for path, text in files.items() if existing.get(path) != text.encode("utf-8")))
    removed = tuple(sorted(set(existing) - set(files)))
    return Changes(written, removed, len(files) - len(written))


def apply(out_dir: Path, files: Mapping[str, str], changes: Changes) -> None:
    if changes.clean:
        return
    writes.commit(out_dir, {path: files[path] for path in changes.written}, changes.removed, layout=OWNED_PATTERNS,
                  owned=owned_at)
    prune_empty(out_dir / CLUSTERS_DIR, {(out_dir / p).parent for p in changes.removed})


def prune_empty(root: Path, dirs: set[Path]) -> None:
    """Remove directories the removals left empty, up to (not including) `root`."""
    for directory in sorted(dirs, key=lambda d: len(d.parts), reverse=True):
        here = directory
        while here != root and root in here.parents:
            try:
                here.rmdir()
            except OSError:  # not empty (or already gone): leave it and its parents alone
                break
            here = here.parent
