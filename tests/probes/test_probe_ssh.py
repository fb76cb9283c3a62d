"""The SSH layer without a network: what is retried, how failures are named, host keys, one connection."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import asyncssh
import pytest

from geosched.files.inventory import SshTarget
from geosched.probes import commands
from geosched.probes.failures import FailureKind, ProbeError
from geosched.probes.hostkeys import HostKeys, Trust, known_hosts_line
from geosched.probes.settings import ProbeSettings
from geosched.probes.ssh import SshPool, classify, is_transient

KEY = asyncssh.generate_private_key("ssh-ed25519")
OTHER = asyncssh.generate_private_key("ssh-ed25519")
PUB = KEY.export_public_key().decode().strip()
SETTINGS = ProbeSettings(connect_attempts=3, connect_timeout_s=2.0)


def target(name: str = "n1", **kw: object) -> SshTarget:
    return SshTarget(name=name, address="198.18.0.2", zone="z", region="r", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("exc", "transient"), [
    (ConnectionResetError(), True),
    (BrokenPipeError(), True),
    (asyncssh.ConnectionLost("lost"), True),
    (asyncssh.DisconnectError(asyncssh.DISC_TOO_MANY_CONNECTIONS, "MaxStartups"), True),
    (asyncssh.ChannelOpenError(asyncssh.OPEN_RESOURCE_SHORTAGE, "busy"), True),
    (asyncssh.HostKeyNotVerifiable("bad key"), False),
    (asyncssh.PermissionDenied("no"), False),
    (asyncssh.DisconnectError(asyncssh.DISC_PROTOCOL_ERROR, "bad"), False),
    (TimeoutError(), False),
    (ConnectionRefusedError(), False),
    (ProbeError(FailureKind.UNREACHABLE, "x"), False),
])
def test_only_transient_errors_are_retried(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_failures_are_named_without_key_material() -> None:
    trust = Trust(host_keys=(KEY.convert_to_public(),), source="inventory host_key")
    cases = {
        asyncssh.HostKeyNotVerifiable("Host key is not trusted"): FailureKind.HOST_KEY_MISMATCH,
        asyncssh.PermissionDenied("Permission denied"): FailureKind.AUTH,
        TimeoutError(): FailureKind.TIMEOUT,
        ConnectionRefusedError(111, "Connection refused"): FailureKind.UNREACHABLE,
        asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "Connection refused"): FailureKind.UNREACHABLE,
        asyncssh.ConnectionLost("lost"): FailureKind.CONNECTION_LOST,
    }
    for exc, kind in cases.items():
        err = classify(exc, target(), trust, SETTINGS)
        assert err.kind is kind
        assert "AAAA" not in err.reason and "198.18.0.2:22" in err.reason


class ScriptedPool(SshPool):
    """An SshPool whose connection attempts follow a script instead of dialling."""

    def __init__(self, script: list[BaseException | None], *targets: SshTarget, hostkeys: HostKeys,
                 settings: ProbeSettings = SETTINGS) -> None:
        super().__init__(targets, hostkeys, settings)
        self.script = script
        self.dials: list[str] = []
        self.tunnels: list[object] = []

    async def _dial(self, target: SshTarget, trust: Trust, tunnel: object) -> asyncssh.SSHClientConnection:  # type: ignore[override]
        self.dials.append(target.name)
        self.tunnels.append(tunnel)
        # Real (event-loop) time: the pool's concurrency is what is tested, and only a dial that yields while it
        # takes a moment lets concurrent dials overlap; the pool takes no clock to fake.
        await asyncio.sleep(0.01)
        step = self.script.pop(0) if self.script else None
        if step is not None:
            raise step
        return FakeConnection()  # type: ignore[return-value]


class FakeConnection:
    def get_server_host_key(self) -> asyncssh.SSHKey:
        return KEY.convert_to_public()

    def close(self) -> None:
        pass

    async def wait_closed(self) -> None:
        pass


def hostkeys(tmp_path: Path) -> HostKeys:
    return HostKeys(tmp_path / "known_hosts", [])


def test_transient_failures_are_retried_then_one_connection(tmp_path: Path) -> None:
    pool = ScriptedPool([ConnectionResetError(), asyncssh.ConnectionLost("x")], target(host_key=PUB),
                        hostkeys=hostkeys(tmp_path))

    async def scenario() -> None:
        # Ten concurrent users of one node share one connection attempt.
        conns = await asyncio.gather(*(pool.connect("n1") for _ in range(10)))
        assert len({id(c) for c in conns}) == 1
        await pool.close()

    asyncio.run(scenario())
    assert pool.dials == ["n1"] * 3 and pool.opened == {"n1": 1}


@pytest.mark.parametrize(("error", "kind"), [
    (asyncssh.HostKeyNotVerifiable("Host key is not trusted"), FailureKind.HOST_KEY_MISMATCH),
    (asyncssh.PermissionDenied("Permission denied"), FailureKind.AUTH),
])
def test_auth_and_host_key_errors_are_never_retried(tmp_path: Path, error: BaseException,
                                                    kind: FailureKind) -> None:
    pool = ScriptedPool([error, None], target(host_key=PUB), hostkeys=hostkeys(tmp_path))
    with pytest.raises(ProbeError) as info:
        asyncio.run(pool.connect("n1"))
    assert info.value.kind is kind and pool.dials == ["n1"] and pool.opened == {}


def test_unknown_host_key_refused_without_dialling(tmp_path: Path) -> None:
    pool = ScriptedPool([], target(), hostkeys=hostkeys(tmp_path))
    with pytest.raises(ProbeError) as info:
        asyncio.run(pool.connect("n1"))
    assert info.value.kind is FailureKind.HOST_KEY_UNKNOWN and "--trust-on-first-use" in info.value.reason
    assert pool.dials == []


def test_trust_on_first_use_pins_the_key_then_verifies_it(tmp_path: Path) -> None:
    keys = hostkeys(tmp_path)
    tofu = ProbeSettings(trust_on_first_use=True)
    pool = ScriptedPool([], target(port=2222), hostkeys=keys, settings=tofu)
    asyncio.run(pool.connect("n1"))
    line = known_hosts_line("198.18.0.2", 2222, KEY.convert_to_public())
    assert (tmp_path / "known_hosts").read_text() == line + "\n"
    assert line.startswith("[198.18.0.2]:2222 ssh-ed25519 AAAA")
    # Next run: the pinned key is what the host must present, TOFU or not.
    trust = keys.trust(target(port=2222))
    assert trust.known and trust.source == str(tmp_path / "known_hosts")
    assert trust.host_keys[0].public_data == KEY.convert_to_public().public_data
    keys.pin(target(port=2222), KEY.convert_to_public())
    assert (tmp_path / "known_hosts").read_text().count("\n") == 1  # no duplicate lines
    assert not keys.trust(target(port=22)).known


def test_inventory_key_outranks_known_hosts_files(tmp_path: Path) -> None:
    other_pub = OTHER.export_public_key().decode().strip()
    user = tmp_path / "user_known_hosts"
    user.write_text(f"198.18.0.2 {other_pub}\n")
    keys = HostKeys(tmp_path / "known_hosts", [user])
    assert keys.trust(target()).source == str(user)
    pinned = keys.trust(target(host_key=PUB))
    assert pinned.source == "inventory host_key"
    assert pinned.host_keys[0].public_data == KEY.convert_to_public().public_data


def test_jump_host_connection_is_the_pooled_one(tmp_path: Path) -> None:
    bastion = SshTarget(name="bastion", address="198.18.0.1", zone="z0", region="r", host_key=PUB)
    inner = target("inner", host_key=PUB, proxy_jump="bastion")
    pool = ScriptedPool([], bastion, inner, hostkeys=hostkeys(tmp_path))

    async def scenario() -> None:
        jump = await pool.connect("bastion")
        await pool.connect("inner")
        assert pool.tunnels == [None, jump]

    asyncio.run(scenario())
    assert pool.opened == {"bastion": 1, "inner": 1}


def test_a_failed_jump_host_fails_its_nodes(tmp_path: Path) -> None:
    bastion = SshTarget(name="bastion", address="198.18.0.1", zone="z0", region="r", host_key=PUB)
    inner = target("inner", host_key=PUB, proxy_jump="bastion")
    pool = ScriptedPool([asyncssh.PermissionDenied("no")], bastion, inner, hostkeys=hostkeys(tmp_path))
    with pytest.raises(ProbeError) as info:
        asyncio.run(pool.connect("inner"))
    assert info.value.kind is FailureKind.JUMP and "bastion: auth" in info.value.reason


def test_commands_quote_every_argument() -> None:
    hostile = "198.18.0.2;reboot&&$(id)"
    line = commands.to_command_line(commands.tcp_rtt(hostile, 22, 3, 0.1, 1.0))
    assert shlex.split(line)[3] == hostile  # one argument, never shell syntax
    assert shlex.split(commands.to_command_line(commands.iperf_server(5201, 30)))[2] == commands.IPERF_SERVER_SCRIPT
    for bad in ("-oProxyCommand=x", "a b", ""):
        with pytest.raises(ValueError):
            commands.ping(bad, 3, 0.1, 1.0)
    assert commands.ping("fd00::2", 3, 0.1, 1.0)[-2:] == ["-6", "fd00::2"]
    with pytest.raises(ValueError):
        commands.kill(1)


def test_external_jump_host_uses_known_hosts_and_the_nodes_key(tmp_path: Path) -> None:
    user_file = tmp_path / "user_known_hosts"
    user_file.write_text(f"[203.0.113.5]:2222 {PUB}\n")
    inner = target("inner", host_key=PUB, proxy_jump="ops@203.0.113.5:2222", key=Path("/keys/id"))
    pool = ScriptedPool([], inner, hostkeys=HostKeys(tmp_path / "known_hosts", [user_file]))
    asyncio.run(pool.connect("inner"))
    assert pool.dials == ["ops@203.0.113.5:2222", "inner"]
    jump = pool.targets["ops@203.0.113.5:2222"]
    assert (jump.address, jump.port, jump.user, jump.key) == ("203.0.113.5", 2222, "ops", Path("/keys/id"))
    assert pool.opened == {"ops@203.0.113.5:2222": 1, "inner": 1}
    # Unknown external jump host: refused like any other unknown key.
    lonely = ScriptedPool([], target("x", host_key=PUB, proxy_jump="root@203.0.113.9"), hostkeys=hostkeys(tmp_path))
    with pytest.raises(ProbeError) as info:
        asyncio.run(lonely.connect("x"))
    assert info.value.kind is FailureKind.JUMP and "host-key-unknown" in info.value.reason


def test_a_garbled_pinned_key_is_refused_by_name(tmp_path: Path) -> None:
    pool = ScriptedPool([], target(host_key="ssh-ed25519 AAAAnotakey"), hostkeys=hostkeys(tmp_path))
    with pytest.raises(ProbeError) as info:
        asyncio.run(pool.connect("n1"))
    assert info.value.kind is FailureKind.HOST_KEY_UNKNOWN and pool.dials == []


@pytest.mark.parametrize(("spec", "dialled"), [
    # ssh(1) -J: an IPv6 jump host with a port is written in brackets; the address dialled has none.
    ("u@[fe80::1]:2222", ("fe80::1", 2222, "u")),
    ("[2001:db8::7]", ("2001:db8::7", 22, "ml")),
    ("ops@2001:db8::7", ("2001:db8::7", 22, "ops")),
    ("ssh://ops@jump.example.com:2200", ("jump.example.com", 2200, "ops")),
    ("ssh://jump.example.com", ("jump.example.com", 22, "ml")),
])
def test_the_pool_dials_an_external_jump_host_as_the_inventory_read_it(tmp_path: Path, spec: str,
                                                                       dialled: tuple[str, int, str]) -> None:
    pool = ScriptedPool([], target("inner", host_key=PUB, proxy_jump=spec, user="ml"), hostkeys=hostkeys(tmp_path))
    with pytest.raises(ProbeError):
        asyncio.run(pool.connect("inner"))  # the jump host's key is unknown here: refused after it is parsed
    jump = pool.targets[spec]
    assert (jump.address, jump.port, jump.user) == dialled
