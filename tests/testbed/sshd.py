"""OpenSSH pieces: key generation, sshd configuration, known_hosts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .netns import TestbedError, run_checked

SSHD_PRIVSEP_DIR = Path("/run/sshd")


def sshd_bin() -> str:
    for candidate in (shutil.which("sshd"), "/usr/sbin/sshd"):
        if candidate and Path(candidate).exists():
            return candidate
    raise TestbedError("sshd not found (apt-get install openssh-server)")


def ensure_privsep_dir() -> None:
    """sshd refuses to start without its privilege-separation chroot.

    Normally the openssh-server init script creates it; we never start that
    service, so create it ourselves.  It is left in place afterwards because
    the system sshd (and concurrent testbeds) expect it too.
    """
    SSHD_PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    os.chmod(SSHD_PRIVSEP_DIR, 0o755)


def generate_ed25519(path: Path, comment: str) -> str:
    """Create an unencrypted ed25519 key pair; returns the public line "ssh-ed25519 AAAA...".

    The comment is dropped from the returned line so it can be compared with
    what ssh-keyscan reports.
    """
    run_checked(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    fields = path.with_name(path.name + ".pub").read_text().split()
    return f"{fields[0]} {fields[1]}"


def known_hosts_line(address: str, port: int, public_key: str) -> str:
    target = address if port == 22 else f"[{address}]:{port}"
    return f"{target} {public_key}"


def sshd_config(
    *,
    listen_address: str,
    port: int,
    host_key: Path,
    authorized_keys: Path,
) -> str:
    return "\n".join(
        [
            f"ListenAddress {listen_address}:{port}",
            f"HostKey {host_key}",
            # The system default pidfile would be shared by all hosts.
            "PidFile none",
            f"AuthorizedKeysFile {authorized_keys}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            # Without PAM, root's "*" password field does not count as locked,
            # and no PAM session modules (which may touch the host) run.
            "UsePAM no",
            # Keys live under /tmp, which StrictModes rejects as world-writable.
            "StrictModes no",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            # Probes and benchmarks open many concurrent connections per host.
            "MaxStartups 200",
            "MaxSessions 64",
            "LoginGraceTime 60",
            "Subsystem sftp internal-sftp",
            "LogLevel VERBOSE",
            "",
        ]
    )
