"""An inventory's `proxy_jump` when it names a host outside the inventory: one parser, used when the inventory is
loaded (so a bad spec is refused before anything dials) and by the SSH pool (so it dials what was checked).

The forms are OpenSSH's (ssh(1) `-J`, ssh_config(5) `ProxyJump`): `[user@]host[:port]` and the URI
`ssh://[user@]host[:port]`, an IPv6 address in brackets when it carries a port (`ops@[2001:db8::1]:2222`). A bare
IPv6 address without a port (`ops@2001:db8::1`) is read as the address, as the pool always did: its colons
cannot be a port. OpenSSH's comma chains (`a,b`) are refused: a chain is written as inventory nodes, each with
its own `proxy_jump`, so that every hop has its pinned host key and the loop and depth checks see it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

# A DNS name or an IPv4 address: labels of letters, digits, '-' and '_' (real internal names carry '_'), not
# starting with '-' (which a command line would read as an option).
HOSTNAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}\Z")
# `\Z`, not `$`: `$` also matches before a trailing newline, which would pass `host\n` on to the resolver.
# A login name: anything printable but the separators of this syntax and whitespace.
USER_RE = re.compile(r"^[^\s@:/\[\]\x00-\x1f\x7f]{1,256}\Z")
URI_SCHEME = "ssh://"
FORMS = "[user@]host[:port], [user@][ipv6]:port or ssh://[user@]host[:port]"


class JumpSpecError(ValueError):
    """Why a jump spec cannot be read: a reason fit to follow the file and field in one line."""


@dataclass(frozen=True, slots=True)
class JumpHost:
    host: str
    port: int = 22
    user: str | None = None  # None: the user of the node reached through it


def looks_external(spec: str) -> bool:
    """A spec that can only mean a host outside the inventory; anything else names an inventory node."""
    return "@" in spec or ":" in spec or "," in spec or spec.startswith(URI_SCHEME)


def parse_jump(spec: str) -> JumpHost:
    """`spec` as a jump host, or JumpSpecError saying what is wrong with it."""
    if "," in spec:
        raise JumpSpecError(f"{spec!r} is a comma-separated jump chain, which geosched does not follow; list each "
                            "jump host as an inventory node with its own proxy_jump")
    rest = spec[len(URI_SCHEME):] if spec.startswith(URI_SCHEME) else spec
    if spec.startswith(URI_SCHEME) and "/" in rest:
        raise JumpSpecError(f"{spec!r}: an ssh:// jump host takes no path")
    user: str | None = None
    if "@" in rest:
        # The last '@', as OpenSSH splits it: the host part never holds one.
        user, _, rest = rest.rpartition("@")
        # isprintable() too: USER_RE lets through format characters such as U+202E (right-to-left override),
        # which would reorder the text of every line that later names this host.
        if not USER_RE.match(user) or not user.isprintable():
            raise JumpSpecError(f"{spec!r}: user {user!r} is empty or holds whitespace or ':/@[]'")
    host, port_text = _split_host_port(spec, rest)
    port = 22
    if port_text is not None:
        if not port_text.isascii() or not port_text.isdigit():
            raise JumpSpecError(f"{spec!r}: port {port_text!r} is not a number")
        # Bounded before int(): a port of thousands of digits makes int() raise its own ValueError (Python's
        # limit on digits), a traceback instead of this line; no port has more than five digits.
        if len(port_text) > 5:
            raise JumpSpecError(f"{spec!r}: port {port_text[:12]}... is not between 1 and 65535")
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise JumpSpecError(f"{spec!r}: port {port} is not between 1 and 65535")
    return JumpHost(host=host, port=port, user=user)


def _split_host_port(spec: str, rest: str) -> tuple[str, str | None]:
    if rest.startswith("["):
        inside, bracket, after = rest[1:].partition("]")
        if not bracket:
            raise JumpSpecError(f"{spec!r}: '[' without its closing ']'")
        if after and not after.startswith(":"):
            raise JumpSpecError(f"{spec!r}: expected ':port' after ']', got {after!r}")
        if not _is_ipv6(inside):
            raise JumpSpecError(f"{spec!r}: {inside!r} in brackets is not an IPv6 address")
        return inside, after[1:] if after else None
    if rest.count(":") > 1:
        if _is_ipv6(rest):
            return rest, None
        raise JumpSpecError(f"{spec!r}: write an IPv6 address with a port in brackets, as [2001:db8::1]:22")
    host, colon, port_text = rest.partition(":")
    if not HOSTNAME_RE.match(host):
        raise JumpSpecError(f"{spec!r}: host {host!r} is not a host name or address (expected {FORMS})")
    return host, port_text if colon else None


# An IPv6 zone (`fe80::1%eth0`) names an interface; ipaddress takes any text after '%', escape sequences
# included, so the zone is held to what interface names are made of.
SCOPE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    _, percent, scope = text.partition("%")
    return not percent or SCOPE_RE.match(scope) is not None
