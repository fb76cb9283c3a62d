"""The Testbed: zones of SSH-reachable hosts in network namespaces with known link truth.

Topology (one instance, slot S, base B = 198.18.0.0 + S * 8192, a /19):

    root ns --[<prefix>]==[ctl]-- router ns --[h<i>]==[eth0]-- host ns <prefix>-h<i>
                                      |
                                     stg (TUN) <-> stage process (delay/loss/rate)

* zone z (0..30) owns B + z*256 /24; host j of the zone gets the /30 at +4j
  (router side .4j+1, host side .4j+2).  The /24 at z=31 holds the controller
  link (router .1, root namespace .2).
* Every packet a host sends enters the router on its veth, matches
  `iif h<i> lookup 100`, and table 100 sends it into the TUN.  The stage
  applies the (src zone, dst zone) Link and writes it back; it then ingresses
  on the TUN, matches no iif rule and the main table delivers it.  Intra-zone
  traffic takes the same path (with the intra-zone Link), so one mechanism
  defines all ground truth.
* The root namespace routes B/19 to the router so that in-process clients
  (asyncssh, the system ssh) reach hosts at their real addresses.  Controller
  traffic bypasses the stage unless `controller_zone` is given.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from .model import Fault, Host, Link, SlowBanner, Unreachable, WrongHostKey
from .netns import (
    SLOT_COUNT,
    SlotLock,
    TestbedError,
    add_guard_route,
    clean_slot,
    cleanup_stale,
    delete_guard_route,
    delete_netns,
    delete_root_link,
    guard_metric,
    guard_route_slots,
    ip_batch,
    ip_bin,
    kill_netns_processes,
    missing_requirements,
    root_links_with_prefix,
    run_checked,
)
from .sshd import (
    ensure_privsep_dir,
    generate_ed25519,
    known_hosts_line,
    sshd_bin,
    sshd_config,
)
from .stage import compile_stage, parse_stats, stage_config

_NET_BASE = int(ipaddress.IPv4Address("198.18.0.0"))
_SLOT_SIZE = 8192
MAX_ZONES = 31
MAX_HOSTS_PER_ZONE = 64
_INFRA_ZONE = 31
_STAGE_TABLE = 100
_TUN_NAME = "stg"
_SLOW_PROXY = Path(__file__).with_name("slowproxy.py")
# Small but non-zero so intra-zone traffic also demonstrably crosses the stage.
DEFAULT_INTRA_ZONE = Link(delay_ms=0.2)

ZoneSpec = int | Sequence[str]


class _HostSpec:
    """Planned host before addresses exist (they depend on the slot picked at start)."""

    def __init__(self, name: str, zone: str, zone_idx: int, idx_in_zone: int, fault: Fault | None):
        self.name = name
        self.zone = zone
        self.zone_idx = zone_idx
        self.idx_in_zone = idx_in_zone
        self.fault = fault


class Testbed:
    """Context manager building the whole testbed on enter and removing all of it on exit.

    zones: zone name -> number of hosts (named "<zone>-1".."<zone>-N") or explicit names.
    links: (zone_a, zone_b) -> Link for the a->b direction; if (b, a) is absent it gets
        the same Link.  A (z, z) key overrides `intra_zone` for zone z.
    default_link: used for zone pairs missing from `links` (else they are an error).
    intra_zone: Link between hosts of the same zone (all traffic crosses the stage).
    faults: host name -> Unreachable() | WrongHostKey() | SlowBanner(delay_s).
    controller_zone: if set, traffic to/from the root namespace gets that zone's links;
        otherwise it bypasses the stage entirely.
    seed: seed of the stage's loss PRNG.
    """

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self,
        zones: Mapping[str, ZoneSpec],
        links: Mapping[tuple[str, str], Link] | None = None,
        *,
        default_link: Link | None = None,
        intra_zone: Link = DEFAULT_INTRA_ZONE,
        faults: Mapping[str, Fault] | None = None,
        controller_zone: str | None = None,
        seed: int = 1,
        port: int = 22,
        user: str = "root",
    ) -> None:
        if not zones:
            raise ValueError("at least one zone is required")
        if len(zones) > MAX_ZONES:
            raise ValueError(f"at most {MAX_ZONES} zones are supported")
        self.zone_names: list[str] = list(zones)
        self._zone_idx = {z: i for i, z in enumerate(self.zone_names)}
        self._specs: list[_HostSpec] = []
        faults = dict(faults or {})
        seen: set[str] = set()
        for zone, spec in zones.items():
            names = [f"{zone}-{i + 1}" for i in range(spec)] if isinstance(spec, int) else list(spec)
            if not names:
                raise ValueError(f"zone {zone!r} has no hosts")
            if len(names) > MAX_HOSTS_PER_ZONE:
                raise ValueError(f"zone {zone!r}: at most {MAX_HOSTS_PER_ZONE} hosts")
            for j, name in enumerate(names):
                if name in seen:
                    raise ValueError(f"duplicate host name {name!r}")
                seen.add(name)
                self._specs.append(_HostSpec(name, zone, self._zone_idx[zone], j, faults.pop(name, None)))
        if faults:
            raise ValueError(f"faults for unknown hosts: {sorted(faults)}")
        if controller_zone is not None and controller_zone not in self._zone_idx:
            raise ValueError(f"unknown controller_zone {controller_zone!r}")
        self._links = self._resolve_links(links or {}, default_link, intra_zone)
        self.controller_zone = controller_zone
        self.seed = seed
        self.port = port
        self.user = user

        # Live state.  Every resource is recorded here *before* it is created so
        # that teardown after a half-finished setup still finds it.
        self.hosts: dict[str, Host] = {}
        self.slot: int | None = None
        self.prefix: str = ""
        self.workdir: Path | None = None
        self.netns_names: list[str] = []
        self.root_link: str | None = None
        self.guard_route = False
        self._slot_lock: SlotLock | None = None
        self._procs: list[subprocess.Popen[Any]] = []
        self._infra: dict[str, subprocess.Popen[bytes]] = {}
        self._stage_proc: subprocess.Popen[bytes] | None = None
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ planning

    def _resolve_links(
        self,
        links: Mapping[tuple[str, str], Link],
        default_link: Link | None,
        intra_zone: Link,
    ) -> dict[tuple[int, int], Link]:
        for a, b in links:
            for z in (a, b):
                if z not in self._zone_idx:
                    raise ValueError(f"link names unknown zone {z!r}")
        resolved: dict[tuple[int, int], Link] = {}
        missing: list[tuple[str, str]] = []
        for a in self.zone_names:
            for b in self.zone_names:
                link = links.get((a, b)) or links.get((b, a))
                if link is None:
                    link = intra_zone if a == b else default_link
                if link is None:
                    missing.append((a, b))
                    continue
                resolved[(self._zone_idx[a], self._zone_idx[b])] = link
        if missing:
            raise ValueError(f"no Link for zone pairs {missing} (give them or default_link)")
        return resolved

    def _addr(self, offset: int) -> str:
        assert self.slot is not None
        return str(ipaddress.IPv4Address(_NET_BASE + self.slot * _SLOT_SIZE + offset))

    def _host_addr(self, spec: _HostSpec) -> str:
        return self._addr(spec.zone_idx * 256 + 4 * spec.idx_in_zone + 2)

    def _router_addr(self, spec: _HostSpec) -> str:
        return self._addr(spec.zone_idx * 256 + 4 * spec.idx_in_zone + 1)

    @property
    def block(self) -> str:
        """The /19 of 198.18.0.0/15 this instance uses."""
        return f"{self._addr(0)}/19"

    @property
    def controller_address(self) -> str:
        """Source address of connections made from the root namespace (the test process)."""
        return self._addr(_INFRA_ZONE * 256 + 2)

    @property
    def router_netns(self) -> str:
        return f"{self.prefix}-router"

    @property
    def known_hosts(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "known_hosts"

    @property
    def client_key(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "client_ed25519"

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Testbed:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        problems = self.close()
        if problems and exc is None:
            raise TestbedError("teardown incomplete: " + "; ".join(problems))
        if problems and exc is not None:
            # Do not mask the test's own failure; still make the leftovers visible.
            exc.add_note("testbed teardown incomplete: " + "; ".join(problems))

    def start(self) -> None:
        if self._started:
            raise TestbedError("testbed already started")
        self._started = True
        try:
            self._setup()
        except BaseException as exc:
            problems = self.close()
            if problems:
                exc.add_note("testbed teardown after failed setup incomplete: " + "; ".join(problems))
            raise

    def close(self) -> list[str]:
        """Tear everything down; idempotent.  Returns what could not be removed."""
        if self._closed:
            return []
        self._closed = True
        problems: list[str] = []
        steps = (
            self._stop_processes,
            self._remove_namespaces,
            self._remove_root_link,
            self._remove_workdir,
        )
        for step in steps:
            try:
                problems += step()
            except Exception as exc:  # keep tearing down the rest
                problems.append(f"{step.__name__}: {exc!r}")
        if self._slot_lock is not None:
            self._slot_lock.release()
            self._slot_lock = None
        return problems

    # ------------------------------------------------------------------ setup

    def _setup(self) -> None:
        reasons = missing_requirements()
        if reasons:
            raise TestbedError("testbed unavailable: " + "; ".join(reasons))
        for problem in cleanup_stale():
            warnings.warn(f"stale testbed leftovers not removed: {problem}", stacklevel=3)
        self._acquire_slot()
        self.prefix = f"gstb{self.slot:02d}-{secrets.token_hex(3)}"
        self.workdir = Path(tempfile.mkdtemp(prefix=self.prefix + "-"))
        # sshd reads authorized_keys with the login user's uid, which need not be root.
        os.chmod(self.workdir, 0o755)

        stage_binary = compile_stage(self.workdir)
        self._make_keys_and_hosts()
        self._create_namespaces()
        self._configure_network()
        self._start_stage(stage_binary)
        self._start_services()

    def _acquire_slot(self) -> None:
        for slot in range(SLOT_COUNT):
            lock = SlotLock.try_acquire(slot)
            if lock is None:
                continue
            self._slot_lock = lock
            self.slot = slot
            # Leftovers can only be from a dead owner, since we hold the lock now.
            problems = clean_slot(slot)
            if problems:
                raise TestbedError(f"slot {slot} has unremovable leftovers: {problems}")
            return
        raise TestbedError(f"all {SLOT_COUNT} testbed slots are in use")

    def _host_dir(self, index: int) -> Path:
        assert self.workdir is not None
        d = self.workdir / f"h{index}"
        d.mkdir(exist_ok=True)
        return d

    def _make_keys_and_hosts(self) -> None:
        assert self.workdir is not None
        generate_ed25519(self.client_key, "geosched-testbed-client")
        authorized = self.workdir / "authorized_keys"
        shutil.copyfile(self.client_key.with_name(self.client_key.name + ".pub"), authorized)
        known: list[str] = []
        for i, spec in enumerate(self._specs):
            d = self._host_dir(i)
            served = generate_ed25519(d / "ssh_host_ed25519_key", f"{spec.name}-served")
            advertised = served
            if isinstance(spec.fault, WrongHostKey):
                advertised = generate_ed25519(d / "advertised_ed25519_key", f"{spec.name}-advertised")
            address = self._host_addr(spec)
            known.append(known_hosts_line(address, self.port, advertised))
            self.hosts[spec.name] = Host(
                name=spec.name,
                zone=spec.zone,
                address=address,
                port=self.port,
                user=self.user,
                key_path=self.client_key,
                host_key=advertised,
                served_host_key=served,
                known_hosts=self.known_hosts,
                netns=None if isinstance(spec.fault, Unreachable) else f"{self.prefix}-h{i}",
                fault=spec.fault,
            )
        self.known_hosts.write_text("\n".join(known) + "\n")

    def _create_namespaces(self) -> None:
        names = [self.router_netns] + [h.netns for h in self.hosts.values() if h.netns]
        self.netns_names.extend(names)
        ip_batch([f"netns add {n}" for n in names])
        sysctl = shutil.which("sysctl") or "/usr/sbin/sysctl"
        no_v6 = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
        router_sysctls = [
            *no_v6,
            "net.ipv4.ip_forward=1",
            # Packets re-enter from the TUN with a source that routes via a veth.
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv4.conf.all.send_redirects=0",
            "net.ipv4.conf.default.send_redirects=0",
        ]
        for name in names:
            values = router_sysctls if name == self.router_netns else no_v6
            # -e: a kernel without IPv6 simply lacks those keys.
            run_checked([ip_bin(), "netns", "exec", name, sysctl, "-e", "-q", "-w", *values])

    def _configure_network(self) -> None:
        router = self.router_netns
        ctl_router = self._addr(_INFRA_ZONE * 256 + 1)
        self.root_link = self.prefix
        run_checked(
            [ip_bin(), "link", "add", "name", self.root_link, "type", "veth",
             "peer", "name", "ctl", "netns", router]
        )  # fmt: skip
        self.guard_route = True
        assert self.slot is not None
        add_guard_route(self.slot)
        v6 = Path(f"/proc/sys/net/ipv6/conf/{self.root_link}/disable_ipv6")
        if v6.exists():
            v6.write_text("1\n")  # keep router solicitations etc. off the link
        ip_batch(
            [
                f"addr add {self.controller_address}/30 dev {self.root_link}",
                f"link set {self.root_link} up",
                f"route add {self.block} via {ctl_router} dev {self.root_link}",
            ]
        )

        cmds = [
            "link set lo up",
            # If the stage dies its TUN and route vanish; this makes hosts see errors
            # instead of silently bypassing the delay.
            f"route add prohibit default table {_STAGE_TABLE} metric 1000",
            f"addr add {ctl_router}/30 dev ctl",
            "link set ctl up",
        ]
        if self.controller_zone is None:
            cmds.append(f"rule add to {self.controller_address}/32 lookup main pref 100")
        else:
            cmds.append(f"rule add iif ctl lookup {_STAGE_TABLE} pref 200")
        for i, spec in enumerate(self._specs):
            host = self.hosts[spec.name]
            if host.netns is None:
                cmds.append(f"route add blackhole {host.address}/32")
                continue
            cmds += [
                f"link add name h{i} type veth peer name eth0 netns {host.netns}",
                f"addr add {self._router_addr(spec)}/30 dev h{i}",
                f"link set h{i} up",
                f"rule add iif h{i} lookup {_STAGE_TABLE} pref 200",
            ]
        ip_batch(cmds, netns=router)

        for spec in self._specs:
            host = self.hosts[spec.name]
            if host.netns is None:
                continue
            ip_batch(
                [
                    "link set lo up",
                    f"addr add {host.address}/30 dev eth0",
                    "link set eth0 up",
                    f"route add default via {self._router_addr(spec)}",
                ],
                netns=host.netns,
            )

    def _start_stage(self, binary: Path) -> None:
        assert self.workdir is not None
        host_zones = {self.hosts[s.name].address: s.zone_idx for s in self._specs}
        if self.controller_zone is not None:
            host_zones[self.controller_address] = self._zone_idx[self.controller_zone]
        config = self.workdir / "stage.conf"
        config.write_text(stage_config(seed=self.seed, host_zones=host_zones, links=self._links))
        with open(self.workdir / "stage.log", "wb") as log:
            # The stage sets its own parent-death signal, so no setpriv wrapper.
            proc = self._spawn_infra(
                "stage",
                self.router_netns,
                [str(binary), _TUN_NAME, str(config), str(self.workdir / "stage.stats")],
                stdout=subprocess.PIPE,
                stderr=log,
                pdeathsig=False,
            )
        self._stage_proc = proc
        self._wait_ready_line(proc, "stage", self.workdir / "stage.log", timeout=10)
        ip_batch(
            [
                f"link set {_TUN_NAME} up",
                f"route add default dev {_TUN_NAME} table {_STAGE_TABLE} metric 10",
            ],
            netns=self.router_netns,
        )

    def _start_services(self) -> None:
        ensure_privsep_dir()
        assert self.workdir is not None
        authorized = self.workdir / "authorized_keys"
        pending: list[tuple[str, Path]] = []
        proxies: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        for i, spec in enumerate(self._specs):
            host = self.hosts[spec.name]
            if host.netns is None:
                continue
            d = self._host_dir(i)
            slow = isinstance(spec.fault, SlowBanner)
            config = d / "sshd_config"
            config.write_text(
                sshd_config(
                    listen_address="127.0.0.1" if slow else host.address,
                    port=self.port,
                    host_key=d / "ssh_host_ed25519_key",
                    authorized_keys=authorized,
                )
            )
            log_path = d / "sshd.log"
            with open(log_path, "wb") as log:
                self._spawn_infra(
                    f"sshd:{host.name}",
                    host.netns,
                    [sshd_bin(), "-D", "-e", "-f", str(config)],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    pdeathsig=True,
                )
            pending.append((host.name, log_path))
            if isinstance(spec.fault, SlowBanner):
                proxy_log = d / "proxy.log"
                with open(proxy_log, "wb") as log:
                    proc = self._spawn_infra(
                        f"proxy:{host.name}",
                        host.netns,
                        [
                            sys.executable,
                            str(_SLOW_PROXY),
                            host.address,
                            str(self.port),
                            "127.0.0.1",
                            str(self.port),
                            repr(spec.fault.delay_s),
                        ],
                        stdout=subprocess.PIPE,
                        stderr=log,
                        pdeathsig=True,
                    )
                proxies.append((f"proxy:{host.name}", proc, proxy_log))
        self._wait_sshd(pending, timeout=20)
        for label, proc, log_path in proxies:
            self._wait_ready_line(proc, label, log_path, timeout=20)

    def _spawn_infra(
        self,
        label: str,
        netns: str,
        argv: list[str],
        *,
        stdout: int | IO[Any],
        stderr: int | IO[Any],
        pdeathsig: bool,
    ) -> subprocess.Popen[bytes]:
        full = [ip_bin(), "netns", "exec", netns]
        if pdeathsig:
            # Kill it if the test process dies without teardown.  `ip netns exec`
            # execs in place, so the parent really is this process.
            full += [shutil.which("setpriv") or "/usr/bin/setpriv", "--pdeathsig", "KILL", "--"]
        full += argv
        proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True)
        self._procs.append(proc)
        self._infra[label] = proc
        return proc

    @staticmethod
    def _wait_ready_line(proc: subprocess.Popen[bytes], label: str, log: Path, *, timeout: float) -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TestbedError(f"{label} not ready after {timeout}s: {_tail(log)}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    proc.wait(timeout=5)
                    raise TestbedError(f"{label} exited ({proc.returncode}): {_tail(log)}")
                buf += chunk
        if not buf.startswith(b"ready"):
            raise TestbedError(f"{label} said {buf!r}: {_tail(log)}")

    def _wait_sshd(self, pending: list[tuple[str, Path]], *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(pending)
        while waiting:
            still: list[tuple[str, Path]] = []
            for name, log in waiting:
                proc = self._infra[f"sshd:{name}"]
                text = log.read_text(errors="replace") if log.exists() else ""
                if "Server listening on" in text:
                    continue
                if proc.poll() is not None:
                    raise TestbedError(f"sshd on {name} exited ({proc.returncode}): {_tail(log)}")
                still.append((name, log))
            waiting = still
            if waiting:
                if time.monotonic() > deadline:
                    raise TestbedError(f"sshd not listening after {timeout}s on {[n for n, _ in waiting]}")
                time.sleep(0.02)  # real sleep: polling real sshd processes until they listen

    # ------------------------------------------------------------------ teardown

    def _stop_processes(self) -> list[str]:
        problems: list[str] = []
        for proc in reversed(self._procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        deadline = time.monotonic() + 3.0
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(timeout=3.0)
                except subprocess.TimeoutExpired:
                    problems.append(f"pid {proc.pid} did not die")
            for stream in (proc.stdout, proc.stderr, proc.stdin):
                if stream is not None:
                    stream.close()
        # Whatever else runs in our namespaces: sshd session children, daemons that
        # probes started over ssh, processes of tb.run() that outlived a timeout.
        stuck = kill_netns_processes(self.netns_names)
        if stuck:
            problems.append(f"processes in testbed namespaces would not die: {stuck}")
        return problems

    def _remove_namespaces(self) -> list[str]:
        left = delete_netns(self.netns_names)
        return [f"namespaces not deleted: {left}"] if left else []

    def _remove_root_link(self) -> list[str]:
        problems: list[str] = []
        if self.guard_route and self.slot is not None:
            delete_guard_route(self.slot)
            if self.slot in guard_route_slots():
                problems.append(f"guard route metric {guard_metric(self.slot)} not deleted")
        if self.root_link is None:
            return problems
        if root_links_with_prefix(self.root_link):
            delete_root_link(self.root_link)
        if root_links_with_prefix(self.root_link):
            problems.append(f"root link {self.root_link} not deleted")
        return problems

    def _remove_workdir(self) -> list[str]:
        if self.workdir is None:
            return []
        shutil.rmtree(self.workdir, ignore_errors=True)
        return [f"could not remove {self.workdir}"] if self.workdir.exists() else []

    # ------------------------------------------------------------------ using it

    def host(self, name: str) -> Host:
        return self.hosts[name]

    def zone_hosts(self, zone: str, *, healthy: bool = False) -> list[Host]:
        """Hosts of `zone` in declaration order; healthy=True drops faulty ones."""
        return [h for h in self.hosts.values() if h.zone == zone and not (healthy and h.fault)]

    def healthy_hosts(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.fault is None]

    def truth(self, zone_a: str, zone_b: str) -> Link:
        """Ground truth of the zone_a -> zone_b direction."""
        return self._links[(self._zone_idx[zone_a], self._zone_idx[zone_b])]

    def rtt_ms(self, zone_a: str, zone_b: str) -> float:
        """Expected idle round-trip time between the zones (sum of both one-way delays)."""
        return self.truth(zone_a, zone_b).delay_ms + self.truth(zone_b, zone_a).delay_ms

    def round_trip_loss(self, zone_a: str, zone_b: str) -> float:
        """Probability that a request/reply pair (e.g. a ping) loses either packet."""
        return 1 - (1 - self.truth(zone_a, zone_b).loss) * (1 - self.truth(zone_b, zone_a).loss)

    def _netns_of(self, host: Host | str) -> str:
        h = self.hosts[host] if isinstance(host, str) else host
        if h.netns is None:
            raise TestbedError(f"host {h.name} has no namespace (fault {h.fault})")
        return h.netns

    def exec_argv(self, host: Host | str, argv: Sequence[str]) -> list[str]:
        """argv that runs `argv` inside the host's namespace."""
        return [ip_bin(), "netns", "exec", self._netns_of(host), *argv]

    def run(
        self,
        host: Host | str,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        check: bool = False,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command inside the host namespace and capture its text output."""
        return subprocess.run(
            self.exec_argv(host, argv),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def popen(
        self,
        host: Host | str,
        argv: Sequence[str],
        *,
        stdout: int | IO[Any] | None = subprocess.PIPE,
        stderr: int | IO[Any] | None = subprocess.PIPE,
    ) -> subprocess.Popen[str]:
        """Start a background command in the host namespace; teardown kills it.

        Output goes to pipes by default: read them, or pass DEVNULL for chatty commands.
        """
        proc = subprocess.Popen(
            self.exec_argv(host, argv),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
        self._procs.append(proc)
        return proc

    def dead_services(self) -> list[str]:
        """Infrastructure processes (stage, sshd, proxies) that have exited."""
        return [label for label, p in self._infra.items() if p.poll() is not None]

    def stage_stats(self, *, timeout: float = 2.0) -> dict[str, dict[str, int]]:
        """Stage counters: "global" and "<zone_a>-><zone_b>" -> rx/tx/lost/qdrop/tx_bytes."""
        if self._stage_proc is None or self.workdir is None:
            raise TestbedError("stage not running")
        path = self.workdir / "stage.stats"
        path.unlink(missing_ok=True)
        self._stage_proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline or self._stage_proc.poll() is not None:
                raise TestbedError("stage did not write its stats")
            time.sleep(0.01)  # real sleep: polling the real stage process for its stats file
        raw = parse_stats(path.read_text())
        named: dict[str, dict[str, int]] = {}
        for key, value in raw.items():
            if "->" in key:
                a, b = (self.zone_names[int(x)] for x in key.split("->"))
                key = f"{a}->{b}"
            named[key] = value
        return named


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:].strip()
    except OSError:
        return "<no log>"
