"""What can go wrong reaching or measuring a node, as a few named kinds the run report lists one by one.

Errors carry a node name, an address and a short reason, never key material, passwords or whole tool
outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureKind(StrEnum):
    UNREACHABLE = "unreachable"  # no TCP connection to sshd (timeout, refused, no route, jump host refused)
    HOST_KEY_MISMATCH = "host-key-mismatch"  # the server's key is not the pinned / known one: refused before auth
    HOST_KEY_UNKNOWN = "host-key-unknown"  # no key pinned or known, and trust on first use not allowed
    AUTH = "auth"  # the server refused our key
    KEY = "key"  # our own private key file (the inventory's `key`) is missing or unreadable: nothing was dialled
    TIMEOUT = "timeout"  # TCP connected but the SSH handshake or a command took too long (slow sshd)
    DEADLINE = "deadline"  # the run's deadline ended this work before it finished
    JUMP = "jump-host"  # the jump host in front of this node failed
    CONNECTION_LOST = "connection-lost"
    PROBE = "probe"  # the remote tool failed or printed something unusable
    SKIPPED = "skipped"  # not attempted because a node it needs failed earlier


@dataclass(frozen=True, slots=True)
class Failure:
    """One line of the failure report: `subject` is a node name or a `src->dst` pair."""

    subject: str
    kind: FailureKind
    reason: str


class ProbeError(Exception):
    """Raised inside the probe layers; the engine turns it into a `Failure` for its subject."""

    def __init__(self, kind: FailureKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class HostKeyUnknown(ProbeError):
    def __init__(self, reason: str) -> None:
        super().__init__(FailureKind.HOST_KEY_UNKNOWN, reason)
