"""Remote commands as argument lists. Pure: no I/O.

SSH hands the remote side one string for the login shell to parse, so every command is an argv that
`to_command_line` quotes with `shlex.join`. Addresses, ports and counts (inventory data) only ever
travel as separate, quoted arguments; the two small scripts below are constants that read them from
their own argv, never by pasting them into code.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Sequence

# Timed TCP connects, one line per attempt: milliseconds, or "-" when the connect failed or timed out.
# A connect is one SYN / SYN-ACK exchange, so it costs one round trip; used where ICMP is filtered.
TCP_RTT_SCRIPT = """\
import socket, sys, time
host, port, count, interval, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), \
float(sys.argv[5])
for i in range(count):
    start = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout):
            print("%.3f" % ((time.perf_counter() - start) * 1000.0), flush=True)
    except OSError:
        print("-", flush=True)
    if i + 1 < count:
        time.sleep(interval)
"""

# Prints its PID (which `exec` hands to `timeout`), then runs a one-off iperf3 server that `timeout`
# kills after $1 seconds whatever happens to us: an SSH channel closing does not stop a remote process
# (OpenSSH may refuse signal requests), so the server's lifetime is bounded on the node itself.
IPERF_SERVER_SCRIPT = 'echo "$$"; exec timeout -k 2 "$1" iperf3 -s -1 -p "$2" --forceflush'


def to_command_line(argv: Sequence[str]) -> str:
    if not argv:
        raise ValueError("empty command")
    return shlex.join(argv)


def _address(address: str) -> str:
    # Inventory addresses are IPs or host names; refuse anything that could read as an option.
    if address.startswith("-") or not address or any(c.isspace() for c in address):
        raise ValueError(f"not a usable address: {address!r}")
    return address


def ping(address: str, count: int, interval_s: float, reply_timeout_s: float) -> list[str]:
    """iputils ping: numeric output, per-reply lines for percentiles, and -w so it ends on its own."""
    deadline = max(1, int(count * interval_s + reply_timeout_s + 1))
    argv = ["ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", "-W", f"{reply_timeout_s:g}",
            "-w", str(deadline)]
    if _is_ipv6(address):
        argv.append("-6")
    return [*argv, _address(address)]


def tcp_rtt(address: str, port: int, count: int, interval_s: float, timeout_s: float) -> list[str]:
    return ["python3", "-c", TCP_RTT_SCRIPT, _address(address), str(port), str(count), f"{interval_s:g}",
            f"{timeout_s:g}"]


def iperf_server(port: int, lifetime_s: int) -> list[str]:
    return ["sh", "-c", IPERF_SERVER_SCRIPT, "sh", str(lifetime_s), str(port)]


def iperf_client(address: str, port: int, seconds: int, omit_s: int, connect_timeout_s: float) -> list[str]:
    return ["iperf3", "-c", _address(address), "-p", str(port), "-t", str(seconds), "-O", str(omit_s), "-J",
            "--connect-timeout", str(max(1, int(connect_timeout_s * 1000)))]


def kill(pid: int) -> list[str]:
    if pid <= 1:
        raise ValueError(f"refusing to signal pid {pid}")
    return ["kill", "-TERM", str(pid)]


def _is_ipv6(address: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(address), ipaddress.IPv6Address)
    except ValueError:
        return False
