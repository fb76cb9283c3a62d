"""The one door every input file comes in by: what may be read, how much of it, and how deep it may go.

Every file a command reads (job specs, fleet and network snapshots, inventories, traces, cluster and GitOps
settings, Terraform output, carbon series) passes here before any parser sees it:

- only a regular file is read: a FIFO, a device such as /dev/zero, a directory or a socket is refused with
  one line (opened non-blocking and checked on the open descriptor, so a FIFO cannot hold the command);
- at most a size limit per kind of file (`LIMITS_MIB`), raised with `GEOSCHED_INPUT_LIMITS`, e.g.
  `GEOSCHED_INPUT_LIMITS=trace=4096,fleet=512` (MiB); the size the file system reports is checked before a
  byte is read (a 3 GiB sparse file costs nothing), and the read stops one byte past the limit whatever the
  size said (a file under /proc says 0);
- YAML anchors and aliases are bounded *before* anything walks the document: an alias is a pointer, so a
  663-byte file can stand for 9^9 nodes (the "billion laughs"); the expanded document may hold at most
  `ALIAS_NODES` nodes more than the file itself, nest at most `MAX_DEPTH` deep, and never contain itself;
- JSON nests at most `MAX_DEPTH` deep and holds no NaN or Infinity;
- CSV fields keep the csv module's 128 KiB limit, reported as the line that broke it.
- inside `confined(root)` (a GitOps command reading a repository), a file under `root` whose real path leads
  out of it (a symbolic link a pull request committed, to the runner's ~/.kube/config or a mounted secret) is
  refused before it is opened: an error naming a field of it would otherwise print part of it in a public CI
  log. Argo CD refuses such "out-of-bounds symlinks" for the same reason (CVE-2022-24904, CVE-2022-31036).

Every refusal is an `InputError`: one line with the file, where in it, and why (exit 2).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geosched.core.errors import InputError
from geosched.files.fields import describe

if TYPE_CHECKING:
    import yaml

ENV_LIMITS = "GEOSCHED_INPUT_LIMITS"
MIB = 1 << 20
# Deeper than any Kubernetes object or geosched document (a JobSet's container limits sit at depth ~12), and
# shallow enough that every recursive walk after this one stays far from Python's recursion limit.
MAX_DEPTH = 64
# Nodes that aliases may add to a YAML document beyond its own: ample for anchors used as intended (shared
# labels, a repeated container), nothing like the exponential growth of nested aliases. go-yaml bounds the
# same thing as a ratio of alias to decoded nodes ("document contains excessive aliasing").
ALIAS_NODES = 100_000


def safe_loader() -> type[yaml.SafeLoader]:
    """libyaml when present: the same safe subset, an order of magnitude faster on large snapshots. PyYAML is
    imported here, on the first document, not with this module: `geosched -h` reads no YAML (17 ms saved)."""
    import yaml
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Kind(StrEnum):
    JOB = "job"
    FLEET = "fleet"
    NETWORK = "network"
    INVENTORY = "inventory"
    TRACE = "trace"
    CLUSTERS = "clusters"
    SETTINGS = "settings"
    TERRAFORM = "terraform"
    CARBON = "carbon"
    THROUGHPUTS = "throughputs"
    KUBECONFIG = "kubeconfig"
    INDEX = "index"
    MANIFEST = "manifest"
    """A file of a GitOps tree (a rendered job, a cluster's README)."""
    JOURNAL = "journal"
    """The journal of an interrupted set of writes (geosched.files.writes)."""
    CREDENTIAL = "credential"
    """A file holding one secret or certificate: a kubeconfig's tokenFile, client key and certificate, CA bundle;
    an SSH public or private key."""
    KNOWN_HOSTS = "known_hosts"
    """An OpenSSH known_hosts file."""


# Each an order of magnitude above the largest real file of its kind: a fleet of 40,000 nodes is ~20 MiB of
# YAML, Philly's cluster_job_log ~200 MiB, a node-pair network view of 2,000 nodes ~300 MiB.
LIMITS_MIB: Mapping[Kind, int] = {
    Kind.JOB: 4, Kind.FLEET: 256, Kind.NETWORK: 512, Kind.INVENTORY: 64, Kind.TRACE: 1024, Kind.CLUSTERS: 4,
    Kind.SETTINGS: 4, Kind.TERRAFORM: 16, Kind.CARBON: 64, Kind.THROUGHPUTS: 16, Kind.KUBECONFIG: 16,
    Kind.INDEX: 64, Kind.MANIFEST: 16, Kind.JOURNAL: 64,
    # A token or a PEM key is a few KiB; the largest CA bundle in use (Mozilla's, as curl ships it) ~230 KiB.
    Kind.CREDENTIAL: 1,
    # ~100 to ~700 bytes a line (an RSA-4096 host key): 16 MiB is tens of thousands of hosts.
    Kind.KNOWN_HOSTS: 16,
}


def _limits_from_environment(env: Mapping[str, str] | None) -> str:
    return (os.environ if env is None else env).get(ENV_LIMITS, "")


# Where the `kind=MiB,...` text comes from. The gate is part of the pure core (the trace readers use it), so it
# never imports the settings: geosched.settings registers its own lookup here when imported (every CLI run
# does), which adds the config file's `input_limits` to the variable. A library caller gets the variable alone.
_limits_text: Callable[[Mapping[str, str] | None], str] = _limits_from_environment


def use_limits_source(source: Callable[[Mapping[str, str] | None], str]) -> None:
    global _limits_text
    _limits_text = source


def limit_bytes(kind: Kind, env: Mapping[str, str] | None = None) -> int:
    """The kind's size limit, from `GEOSCHED_INPUT_LIMITS` (`kind=MiB,...`; or the config file's `input_limits`)
    when it names the kind."""
    return parse_limits(_limits_text(env), ENV_LIMITS).get(kind, LIMITS_MIB[kind]) * MIB


def parse_limits(text: str, source: str) -> dict[Kind, int]:
    """`kind=MiB,...` as MiB by kind; a bad item is an InputError naming `source` and the kind."""
    out: dict[Kind, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name.strip() not in {k.value for k in Kind}:
            raise InputError(source, "", f"unknown kind {name.strip()!r} (known: {', '.join(Kind)})")
        if not value.strip().isdigit() or not 0 < int(value) <= 1 << 20:
            raise InputError(source, name.strip(),
                             f"expected a whole number of MiB (1..1048576), got {describe(value)}")
        out[Kind(name.strip())] = int(value)
    return out


_BOUND: ContextVar[Path | None] = ContextVar("geosched_gate_bound", default=None)


@contextlib.contextmanager
def confined(root: Path | None) -> Iterator[None]:
    """Within the block, files under `root` may not lead out of it through links (see the module doc); a file
    the caller names outside `root` is the caller's choice and read as usual. None: no bound."""
    token = _BOUND.set(None if root is None else Path(os.path.abspath(root)))
    try:
        yield
    finally:
        _BOUND.reset(token)


def _check_bound(path: Path) -> None:
    root = _BOUND.get()
    if root is None or not Path(os.path.abspath(path)).is_relative_to(root):
        return
    if not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root)):
        raise InputError(str(path), "", f"leads out of the repository {root} through a symbolic link; geosched does "
                         "not follow links out of a repository it reads (name a file outside it on the command "
                         "line instead)")


def read_bytes(path: Path, kind: Kind) -> bytes:
    """The whole file, if it is a regular file within its kind's limit."""
    return _through(path, kind, read=True)


def check_file(path: Path, kind: Kind) -> None:
    """The same checks without reading, for a file a library reads itself (the Kubernetes client's
    kubeconfig)."""
    _through(path, kind, read=False)


def read_bytes_at(dir_fd: int, name: str, kind: Kind, source: str) -> bytes:
    """`name` in the directory open as `dir_fd`, never through a symbolic link (a file of a tree geosched owns,
    reached without links), with the checks of `read_bytes`; `source` names it in errors."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        raise _open_error(source, exc) from None
    return _from_fd(fd, source, kind, read=True)


def _through(path: Path, kind: Kind, *, read: bool) -> bytes:
    _check_bound(path)
    try:
        # Non-blocking: opening a FIFO for reading would otherwise wait for a writer, forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _open_error(str(path), exc) from None
    return _from_fd(fd, str(path), kind, read=read)


def _open_error(source: str, exc: OSError) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(source, "", "no such file")
    if exc.errno == errno.ELOOP:
        return InputError(source, "", "is a symbolic link; geosched does not follow links here")
    return InputError(source, "", f"cannot read: {exc.strerror or exc}")


def _from_fd(fd: int, source: str, kind: Kind, *, read: bool) -> bytes:
    """Checks and reads an open descriptor, and closes it."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(source, "", f"not a regular file ({file_type(info.st_mode)}): give a {kind.value} file")
        limit = limit_bytes(kind)
        # The size first: a sparse or huge file is refused before a byte of it is in memory.
        if info.st_size > limit:
            raise _too_large(source, kind, limit)
        data = _read_up_to(fd, limit + 1) if read else b""
    except OSError as exc:  # EIO, EISDIR on odd file systems: the file cannot be read, whatever it holds
        raise InputError(source, "", f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while read, or a size the file system does not report (/proc)
        raise _too_large(source, kind, limit)
    return data


def _too_large(source: str, kind: Kind, limit: int) -> InputError:
    return InputError(source, "", f"larger than the {limit // MIB} MiB limit for {kind.value} files "
                      f"(raise it with {ENV_LIMITS}={kind.value}=MiB)")


def read_text(path: Path, kind: Kind, encoding: str = "utf-8") -> str:
    data = read_bytes(path, kind)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise InputError(str(path), "", f"not {encoding.upper().removesuffix('-SIG')} text (byte {exc.start})"
                         ) from None


STDIN = "<stdin>"


def read_stdin_text(kind: Kind, encoding: str = "utf-8") -> str:
    """Standard input (a path of `-`), bounded like a file of `kind`: at most the kind's limit is read, and
    errors name `<stdin>`."""
    limit = limit_bytes(kind)
    # The binary stream under sys.stdin (a pipe, a file, or a test runner's buffer); read(n) stops at n bytes.
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(STDIN, "", "there is no standard input to read")
    try:
        data: bytes = stream.read(limit + 1)
    except (OSError, ValueError) as exc:  # closed, or a descriptor that cannot be read
        raise InputError(STDIN, "", f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > limit:
        raise _too_large(STDIN, kind, limit)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise InputError(STDIN, "", f"not {encoding.upper().removesuffix('-SIG')} text (byte {exc.start})") from None


def _read_up_to(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 8 * MIB))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def file_type(mode: int) -> str:
    """What a file that is not a regular one is, as the one lines say it."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


# --- YAML ------------------------------------------------------------------------------------------

def parse_yaml(text: str, source: str, *, stream: bool = False) -> Any:
    """One YAML (or JSON) document, or with `stream` the list of all non-empty documents, each bounded (see
    the module doc) before it is built; errors carry the line the parser stopped at."""
    import yaml
    loader = safe_loader()(text)
    try:
        if not stream:
            node = loader.get_single_node()
            return None if node is None else _construct(loader, node, source)
        documents = []
        while loader.check_node():
            node = loader.get_node()
            document = None if node is None else _construct(loader, node, source)
            if document is not None:
                documents.append(document)
        return documents
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(source, where, f"not valid YAML: {problem}") from None
    except RecursionError:  # the pure-Python composer, without libyaml, recurses per level
        raise InputError(source, "", f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a scalar its tag cannot hold (an int of 5,000 digits)
        raise InputError(source, "", f"not valid YAML: {str(exc)[:120]}") from None
    finally:
        loader.dispose()


def _construct(loader: yaml.SafeLoader, node: yaml.Node, source: str) -> Any:
    import yaml
    check_yaml_node(node, source)
    try:
        return loader.construct_document(node)
    except yaml.YAMLError:
        raise
    except Exception as exc:  # PyYAML's constructors fail on some explicitly tagged values (`!!timestamp x`)
        raise InputError(source, "", f"not valid YAML: a tagged value cannot be read ({type(exc).__name__})"
                         ) from None


def check_yaml_node(root: yaml.Node, source: str) -> None:
    """Refuse a composed document whose expansion (every alias replaced by what it names) is too large or too
    deep, or contains itself. One pass over the distinct collections, without recursion: the expanded size
    and depth of a collection are computed once and reused wherever an alias points at it."""
    import yaml  # once per document; the helpers below get the node classes (they run once per collection)
    scalar, mapping, sequence = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    own = 0  # nodes as written; an alias to a collection counts once, where its anchor is
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node, mapping, sequence)
        if done:
            on_path.discard(key)
            total, deepest = 1, 0
            for child in children:
                if isinstance(child, scalar):
                    total, deepest = total + 1, max(deepest, 1)
                else:
                    total, deepest = total + size[id(child)], max(deepest, depth[id(child)])
            size[key], depth[key] = total, deepest + 1
            own += 1 + sum(isinstance(c, scalar) for c in children)
            if deepest + 1 > MAX_DEPTH:
                raise _where(source, node, f"nested deeper than {MAX_DEPTH} levels")
            if total > own + ALIAS_NODES:
                raise _where(source, node, f"aliases expand the document by more than {ALIAS_NODES:,} nodes "
                             "(nested anchors: a YAML bomb)")
            continue
        if key in size:
            continue
        if key in on_path:
            raise _where(source, node, "an alias refers to a node that contains it")
        if isinstance(node, mapping):
            _check_unique_keys(node, source, scalar)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if not isinstance(c, scalar) and id(c) not in size)


def _check_unique_keys(node: yaml.MappingNode, source: str, scalar: type[yaml.ScalarNode]) -> None:
    """Refuse a mapping that gives one key twice (`name: a` ... `name: b`, or `{key: a, key: b}`): PyYAML keeps
    the last silently, so the value read is not the one the author may have checked. YAML 1.2 requires keys to
    be unique (spec section 3.2.1.1); JSON objects parsed here are YAML flow mappings and held to the same.
    Scalar keys are compared as written with their tag; merge keys (`<<`) may repeat."""
    seen: dict[tuple[str, str], yaml.Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, scalar) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        first = seen.setdefault((key_node.tag, key_node.value), key_node)
        if first is not key_node:
            line = f" (first on line {first.start_mark.line + 1})" if first.start_mark is not None else ""
            raise _where(source, key_node, f"duplicate key {key_node.value[:80]!r}{line}")


def _children(node: yaml.Node, mapping: type[yaml.MappingNode], sequence: type[yaml.SequenceNode]) -> list[yaml.Node]:
    if isinstance(node, sequence):
        return list(node.value)
    if isinstance(node, mapping):
        return [part for pair in node.value for part in pair]
    return []


def _where(source: str, node: yaml.Node, reason: str) -> InputError:
    mark = node.start_mark
    return InputError(source, f"line {mark.line + 1}" if mark is not None else "", reason)


# --- JSON ------------------------------------------------------------------------------------------

def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


DECODER = json.JSONDecoder(parse_constant=_no_constant)


def parse_json(text: str, source: str) -> Any:
    """One JSON document, bounded in depth, without NaN or Infinity."""
    with json_errors(source):
        return check_depth(DECODER.decode(text), source)


def decode_json_at(text: str, pos: int, source: str) -> tuple[Any, int]:
    """The JSON value starting at `pos` and where it ends, bounded like `parse_json` (for readers that walk a
    long list one element at a time)."""
    with json_errors(source):
        value, end = DECODER.raw_decode(text, pos)
        return check_depth(value, source), end


@contextlib.contextmanager
def json_errors(source: str) -> Iterator[None]:
    try:
        yield
    except json.JSONDecodeError as exc:
        # The decoder's message names a position, never the text around it, so nothing sensitive leaks.
        raise InputError(source, f"line {exc.lineno}", f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(source, "", f"not valid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # NaN, Infinity, an integer of thousands of digits
        raise InputError(source, "", f"not valid JSON: {str(exc)[:120]}") from None


def check_depth(value: Any, source: str) -> Any:
    """`value` itself, if no container in it is nested deeper than MAX_DEPTH (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > MAX_DEPTH:
            raise InputError(source, "", f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return value


# --- CSV -------------------------------------------------------------------------------------------

class CsvRows:
    """csv.reader over text whose errors (a field over the module's 128 KiB limit, a NUL byte) are InputErrors
    naming the line, instead of `_csv.Error` tracebacks."""

    def __init__(self, text: str, source: str) -> None:
        self._reader = csv.reader(io.StringIO(text))
        self.source = source

    def __iter__(self) -> CsvRows:
        return self

    def __next__(self) -> list[str]:
        try:
            return next(self._reader)
        except csv.Error as exc:
            raise InputError(self.source, f"line {self._reader.line_num}", f"not valid CSV: {exc}") from None

    @property
    def line_num(self) -> int:
        return self._reader.line_num


def load_document(path: Path, kind: Kind) -> Any:
    """A YAML (or JSON) file of this kind: through the gate, then bounded-parsed."""
    return parse_yaml(read_text(path, kind), str(path))
