"""Who may reach the machines geosched launches, as the user writes it: the login user's name and the networks
SSH is opened to. Pure checks of a setting's text, read by the settings (geosched.settings.model, when a
value is read) and by the providers that write them into a cloud (geosched.providers.config, aws): one definition
below both, so the settings need not reach into an edge for them."""

from __future__ import annotations

import contextlib
import ipaddress
import re

from geosched.core.errors import InputError

# The login user geosched creates on the machines it launches: a portable Linux user name (useradd's default
# NAME_REGEX, at most 32 characters). Checked when the setting is read (geosched.settings.model), for
# every cloud: on GCP it becomes a line `user:key` of the instance's ssh-keys metadata, where a line break in it
# started a second entry, another user with another key. \Z, not $: $ also matches before a final line break.
SSH_USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")


def parse_admin_cidrs(text: str, source: str) -> tuple[str, ...]:
    """GEOSCHED_ADMIN_CIDRS: comma-separated IPv4/IPv6 networks, each written as its network address (a
    typo like 203.0.113.7/24 is refused rather than silently widened or narrowed). A bare address is one
    host (/32, /128). Bad input is one InputError naming `source` (the variable or file it came from)."""
    out: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            raise InputError(source, "", f"empty entry in {text!r}: expected comma-separated CIDRs such as "
                             "203.0.113.0/24")
        try:
            net = ipaddress.ip_network(item, strict=True)
        except ValueError as exc:
            hint = ""
            with contextlib.suppress(ValueError):
                hint = f"; did you mean {ipaddress.ip_network(item, strict=False)}?"
            raise InputError(source, "", f"{item!r} is not a CIDR ({exc}){hint}") from None
        if isinstance(net, ipaddress.IPv6Network) and net.network_address.scope_id is not None:
            # A zone (`%eth0`) names an interface of the machine that reads it; a cloud firewall rule has none,
            # and the clouds refuse or drop it, so the rule would not say what was meant.
            bare = ipaddress.ip_network(f"{str(net.network_address).partition('%')[0]}/{net.prefixlen}")
            raise InputError(source, "", f"{item!r} carries an IPv6 zone id (%{net.network_address.scope_id}), "
                             f"which names an interface of one machine, not a network; write {bare}")
        if str(net) not in out:
            out.append(str(net))
    return tuple(out)
