"""Provider settings from the environment. Pure: the environment is passed in as a mapping (the CLI passes
`geosched.settings.environ()`: the process environment, with the config file's values for the unset variables).

Credentials and API endpoints are never settings of geosched:
- AWS: boto3's standard chain (AWS_* environment variables, ~/.aws files, instance roles; AWS_ENDPOINT_URL
  or AWS_ENDPOINT_URL_EC2 for another endpoint such as a local emulator).
- GCP: google.auth's application default credentials; GEOSCHED_GCP_ENDPOINT sets the Compute API endpoint
  (client_options.api_endpoint) for a local emulator or a private endpoint.

The network to launch into is the `terraform output -json` of geosched's Terraform modules (`--tf-output` or
GEOSCHED_TERRAFORM_OUTPUT); without one, launches use the default VPC (AWS) and default network (GCP), with a
security group / firewall rules geosched creates on demand: SSH (tcp 22) from GEOSCHED_ADMIN_CIDRS (or
`--admin-cidr`) and all traffic between geosched's own machines. There is no default: until one is set,
`provision` refuses before any API call and `check` warns; 0.0.0.0/0 is allowed only as an explicit choice,
and `provision` warns about it (and any CIDR wider than WIDE_PREFIX) unless --allow-wide-admin-cidr.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from geosched import settings
from geosched.clouds import gcp as gcp_cloud
from geosched.core.errors import InputError
from geosched.files.access import parse_admin_cidrs
from geosched.files.gate import Kind, read_bytes
from geosched.providers import launchsettings
from geosched.providers.launchsettings import aws as aws_launch
from geosched.providers.launchsettings import gcp as gcp_launch
from geosched.providers.launchsettings.aws import AwsSettings
from geosched.providers.launchsettings.gcp import GcpSettings
from geosched.providers.terraform import NetworkConfig

_Launch = TypeVar("_Launch")

# The variables, as geosched.settings declares them (with their config file keys, defaults and help).
ENV_GCP_PROJECT = settings.of_cloud(gcp_cloud.NAME, "project").env
ENV_GCP_ENDPOINT = settings.of_cloud(gcp_cloud.NAME, "endpoint").env
ENV_INVENTORY = settings.INVENTORY.env
ENV_TERRAFORM_OUTPUT = settings.TERRAFORM_OUTPUT.env
ENV_ADMIN_CIDRS = settings.ADMIN_CIDRS.env

DEFAULT_SSH_USER: str = settings.default_of(settings.SSH_USER)
DEFAULT_PUBLIC_KEYS = ("~/.ssh/id_ed25519.pub", "~/.ssh/id_ecdsa.pub", "~/.ssh/id_rsa.pub")
# Who may reach port 22 of on-demand networks when nothing is configured: no one. SkyPilot opens it to the
# world (login is key-only), but nothing here is open to the world unless its user chose so; `provision`
# refuses with the line that says how to choose (ADMIN_CIDRS_HOWTO). Nothing but port 22 is ever opened to
# outside the gang.
DEFAULT_ADMIN_CIDRS: tuple[str, ...] = ()
# Shorter prefixes than these are "wide": more than any one site administers from (an IPv4 /8 is 16.7 million
# addresses; IPv6 blocks are handed out larger, so its bound is looser). Wide is allowed, but provision warns
# naming the exposure unless --allow-wide-admin-cidr says it was meant.
WIDE_PREFIX = {4: 8, 6: 16}
ADMIN_CIDRS_HOWTO = (f"set {ENV_ADMIN_CIDRS} to the networks you administer from (comma-separated CIDRs, e.g. "
                     "203.0.113.0/24), or pass --admin-cidr 0.0.0.0/0 --allow-wide-admin-cidr to open SSH to the world "
                     "on purpose")


@dataclass(frozen=True, slots=True)
class SshSettings:
    inventory: Path | None = None
    leases: Path | None = None


@dataclass(frozen=True)
class ProviderSettings:
    # Each cloud's launch settings by its name (geosched.providers.launchsettings: one module per cloud).
    clouds: Mapping[str, object] = field(default_factory=launchsettings.defaults)
    ssh: SshSettings = field(default_factory=SshSettings)
    ssh_public_key: str | None = None
    ssh_user: str = DEFAULT_SSH_USER
    network: NetworkConfig | None = None
    admin_cidrs: tuple[str, ...] = DEFAULT_ADMIN_CIDRS
    # Where the admin CIDRs came from: "--admin-cidr", GEOSCHED_ADMIN_CIDRS, or "" when none is configured.
    admin_cidrs_from: str = ""

    def of_cloud(self, name: str, kind: type[_Launch]) -> _Launch:
        """The launch settings of cloud `name`, of the type its launchsettings module defines (its defaults when
        this object was made without them)."""
        value = self.clouds.get(name)
        if value is None:
            return kind()
        if not isinstance(value, kind):
            raise TypeError(f"the launch settings of {name!r} are {type(value).__name__}, not {kind.__name__}")
        return value

    # Typed access for the two clouds geosched launches on; a new cloud's provider asks `of_cloud`.
    @property
    def aws(self) -> AwsSettings:
        return self.of_cloud(aws_launch.NAME, AwsSettings)

    @property
    def gcp(self) -> GcpSettings:
        return self.of_cloud(gcp_launch.NAME, GcpSettings)


def from_env(env: Mapping[str, str], home: Path, *, public_key_path: Path | None = None,
             inventory: Path | None = None, network: Path | None = None,
             admin_cidrs: str | None = None) -> ProviderSettings:
    """Settings from environment variables (see module docstring), with the state directory for the SSH
    leases file. The SSH public key is read from `public_key_path`, GEOSCHED_SSH_PUBLIC_KEY or the usual
    ~/.ssh/*.pub, first found; the network from `network` or GEOSCHED_TERRAFORM_OUTPUT (a bad file is an
    InputError naming it); the admin CIDRs from `admin_cidrs` (`--admin-cidr`) or GEOSCHED_ADMIN_CIDRS."""
    from geosched.settings.model import from_variables

    values = from_variables(env)
    net_path = network or values.terraform_output
    net = launchsettings.load_terraform_output(net_path) if net_path is not None else None
    if admin_cidrs is not None:
        source = "--admin-cidr"
        cidrs = parse_admin_cidrs(admin_cidrs.strip(), source) if admin_cidrs.strip() else DEFAULT_ADMIN_CIDRS
    else:
        source, cidrs = ENV_ADMIN_CIDRS, values.admin_cidrs or DEFAULT_ADMIN_CIDRS
    # Each cloud's own settings, by the names its module declares them with (geosched.clouds.<cloud>.SETTINGS), into
    # its launch settings (geosched.providers.launchsettings.<cloud>).
    launch = launchsettings.build(values.of_cloud, net, cidrs)
    ssh = SshSettings(inventory=inventory or values.inventory, leases=home / "ssh-leases.json")
    return ProviderSettings(clouds=MappingProxyType(launch), ssh=ssh,
                            ssh_public_key=read_public_key(env, public_key_path, values.ssh_public_key),
                            ssh_user=values.ssh_user, network=net, admin_cidrs=cidrs,
                            admin_cidrs_from=source if cidrs else "")


# IPv6 prefixes that hold the IPv4 internet inside them: IPv4-mapped addresses (RFC 4291 section 2.5.5.2,
# ::ffff:0:0/96, how a dual-stack socket sees an IPv4 peer) and the NAT64 well-known prefix (RFC 6052 section 2.1,
# 64:ff9b::/96). A CIDR inside one is as wide as the IPv4 block it maps: ::ffff:0.0.0.0/96 is 0.0.0.0/0.
IPV4_IN_IPV6 = (ipaddress.IPv6Network("::ffff:0:0/96"), ipaddress.IPv6Network("64:ff9b::/96"))


def _as_ipv4(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> ipaddress.IPv4Network | None:
    """The IPv4 block an IPv6 CIDR inside IPV4_IN_IPV6 maps, or None."""
    if not isinstance(net, ipaddress.IPv6Network):
        return None
    for outer in IPV4_IN_IPV6:
        if net.subnet_of(outer):
            low = int(net.network_address) - int(outer.network_address)
            return ipaddress.IPv4Network((low, net.prefixlen - outer.prefixlen))
    return None


def _held_ipv4_prefix(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> ipaddress.IPv6Network | None:
    """The prefix of IPV4_IN_IPV6 a narrow-looking IPv6 CIDR holds whole (::fffe:0:0/95 holds ::ffff:0:0/96,
    ::/64 both's first), or None: such a CIDR is the whole IPv4 internet and more, whatever its own length."""
    if not isinstance(net, ipaddress.IPv6Network):
        return None
    return next((outer for outer in IPV4_IN_IPV6 if outer != net and outer.subnet_of(net)), None)


def is_world(cidr: str) -> bool:
    """0.0.0.0/0, ::/0, or the whole IPv4 internet written inside IPv6 (::ffff:0.0.0.0/96)."""
    net = ipaddress.ip_network(cidr)
    mapped = _as_ipv4(net)
    return (mapped or net).prefixlen == 0


def wide_admin_cidrs(cidrs: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The CIDRs wider than WIDE_PREFIX of their family (0.0.0.0/0 and ::/0 included); an IPv4 block written
    inside IPv6 is measured as the IPv4 block it is."""
    out = []
    for cidr in cidrs:
        net = ipaddress.ip_network(cidr)
        mapped = _as_ipv4(net)
        measured = mapped if mapped is not None else net
        if measured.prefixlen < WIDE_PREFIX[measured.version] or _held_ipv4_prefix(net) is not None:
            out.append(cidr)
    return tuple(out)


def exposure(cidr: str) -> str:
    """Who a wide CIDR lets try SSH, in words: `the whole IPv4 internet (0.0.0.0/0)`, `268,435,456 addresses
    (16.0.0.0/4)`, `the whole IPv4 internet (::ffff:0:0/96, IPv4 written as IPv6)`."""
    net = ipaddress.ip_network(cidr)
    mapped = _as_ipv4(net)
    where = f"{cidr}, IPv4 written as IPv6" if mapped is not None else cidr
    measured = mapped if mapped is not None else net
    if measured.prefixlen == 0:
        return f"the whole IPv{measured.version} internet ({where})"
    held = _held_ipv4_prefix(net)
    if held is not None and measured.prefixlen >= WIDE_PREFIX[measured.version]:
        return f"the whole IPv4 internet ({cidr} holds {held}, IPv4 written as IPv6)"
    count = (f"{measured.num_addresses:,}" if measured.version == 4
             else f"2^{measured.max_prefixlen - measured.prefixlen}")
    return f"{count} addresses ({where})"


def read_public_key(env: Mapping[str, str], explicit: Path | None = None, named: Path | None = None) -> str | None:
    """The first public key found: `explicit` (`--ssh-key`), `named` (else GEOSCHED_SSH_PUBLIC_KEY), ~/.ssh/*.pub."""
    candidates = [explicit] if explicit else []
    if named is None:
        named = settings.from_environment(settings.SSH_PUBLIC_KEY, env)
    if named is not None:
        candidates.append(named)
    if not candidates:
        candidates = [Path(p) for p in DEFAULT_PUBLIC_KEYS]
    for path in candidates:
        text = _public_key_text(path.expanduser())
        # A private key must never end up in user data or metadata.
        if text is not None and text.startswith(("ssh-", "ecdsa-", "sk-")) and "PRIVATE KEY" not in text:
            return text.splitlines()[0]
    return None


def _public_key_text(path: Path) -> str | None:
    """The file's text, through the gate (a regular file of at most 1 MiB, its size before reading: /dev/zero or a
    2 GiB sparse file was read whole, to a MemoryError); None when there is no such file. A file that is there but
    cannot be a key is one line naming it: a key saved by PowerShell's `>` is UTF-16, which was a traceback."""
    try:
        data = read_bytes(path, Kind.CREDENTIAL)
    except InputError as exc:
        if exc.reason == "no such file":
            return None
        raise InputError(str(path), "", f"{exc.reason} (an OpenSSH public key, e.g. ~/.ssh/id_ed25519.pub)"
                         ) from None
    try:
        return data.decode("utf-8").strip()  # a key is ASCII; its comment may be any UTF-8
    except UnicodeDecodeError as exc:
        raise InputError(str(path), "", f"not an OpenSSH public key: not UTF-8 text (byte {exc.start}); a key "
                         "saved as UTF-16 (PowerShell's `>`) must be saved as UTF-8 or ASCII") from None
