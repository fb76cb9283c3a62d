"""Kubeconfigs, read through the input gate before the Kubernetes client sees a byte of them.

The official client reads a kubeconfig with `yaml.safe_load` and walks it with `dict[...]`: a billion-laughs
file expands to gigabytes, a string where a list goes is a TypeError traceback, and its errors quote whole
entries (`Expected key name in f/{'user': {'token': ...}}`). So geosched reads each file itself:

- `read`: every file of the list kubectl would read (`--kubeconfig`, else each of `$KUBECONFIG`, else
  ~/.kube/config) through `geosched.files.gate` (a regular file, its size before reading, the bounded YAML
  parser: aliases, depth, numbers), then `check` (the shape), then `merge` (kubectl's rules), then hands the
  client the merged mapping (`geosched.kube.client.connect`). Relative file paths are made absolute against
  the file that names them, as client-go's `ResolveLocalPaths` does, since the client sees no file any more.
- `check`: the shape of client-go's `clientcmd/api/v1` Config: lists of named entries, each field of its type
  (a string, a bool, a list of strings). Errors name the file and the field path (`users[1].user.token`) and
  never a value: a value may be a credential.
- `credentials`: every secret the file holds (tokens, passwords, key and certificate data, auth-provider
  config, exec env values but the few that only select a configuration: PLAIN_EXEC_ENV), registered with
  `geosched.console.redact` so that no error, warning, log line or JSON output can carry one, whatever library
  produced the text.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from geosched.console import redact
from geosched.core.errors import InputError
from geosched.files.gate import Kind, parse_yaml, read_bytes, read_text

DEFAULT_KUBECONFIG = "~/.kube/config"
LISTS = {"clusters": "cluster", "contexts": "context", "users": "user"}

# Field types of client-go's clientcmd/api/v1 (types.go); a field not listed is left to the client as it is.
STR, BOOL, STRS, MAP = "a string", "true or false", "a list of strings", "a mapping"
CLUSTER_FIELDS = {"server": STR, "tls-server-name": STR, "insecure-skip-tls-verify": BOOL,
                  "certificate-authority": STR, "certificate-authority-data": STR, "proxy-url": STR,
                  "disable-compression": BOOL}
CONTEXT_FIELDS = {"cluster": STR, "user": STR, "namespace": STR}
USER_FIELDS = {"client-certificate": STR, "client-certificate-data": STR, "client-key": STR,
               "client-key-data": STR, "token": STR, "tokenFile": STR, "as": STR, "as-uid": STR,
               "as-groups": STRS, "username": STR, "password": STR, "auth-provider": MAP, "exec": MAP}
EXEC_FIELDS = {"command": STR, "args": STRS, "apiVersion": STR, "installHint": STR,
               "provideClusterInfo": BOOL, "interactiveMode": STR}
SECRET_USER_FIELDS = ("token", "password", "client-key-data", "client-certificate-data")
# Paths client-go resolves against the kubeconfig's directory (loader.go, GetClusterFileReferences and
# GetAuthInfoFileReferences; an exec command only when it is a path, not a name looked up on the PATH).
CLUSTER_PATHS = ("certificate-authority",)
USER_PATHS = ("client-certificate", "client-key", "tokenFile")
# Exec-plugin env names that only select a configuration and never hold a secret: what `aws eks
# update-kubeconfig --profile P` writes (AWS_PROFILE, EKS User Guide "create-kubeconfig") and the selectors of the
# AWS CLI and gcloud (AWS CLI "Environment variables to configure the AWS CLI", gcloud "Properties"). Their
# values are names users also give clusters and namespaces: redacting them mangled those names in every output
# (`<redacted>` for a namespace called like the profile) and hid the profile from "The config profile (P) could
# not be found". Every other env value stays a secret: unknown names are redacted.
PLAIN_EXEC_ENV = frozenset({
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_STS_REGIONAL_ENDPOINTS", "AWS_DEFAULT_OUTPUT",
    "CLOUDSDK_CONFIG", "CLOUDSDK_CORE_PROJECT", "CLOUDSDK_ACTIVE_CONFIG_NAME", "CLOUDSDK_COMPUTE_REGION",
    "CLOUDSDK_COMPUTE_ZONE", "USE_GKE_GCLOUD_AUTH_PLUGIN", "KUBECONFIG"})


# Each file field and the field that holds its content inline, which the client reads instead (its FileOrData
# prefers the inline field; so does client-go, where `token` wins over `tokenFile`).
CLUSTER_INLINE = {"certificate-authority": "certificate-authority-data"}
USER_INLINE = {"client-certificate": "client-certificate-data", "client-key": "client-key-data", "tokenFile": "token"}


class KubeconfigError(InputError):
    """The entries of the context used cannot be used: a file they name (a CA bundle, a client certificate or key,
    a token file) is not there or not a file, or the client refuses them (a context whose cluster is missing). The
    user's input, so exit 2 on every command, never reported as one cluster's outage."""


@dataclass(frozen=True)
class Kubeconfig:
    source: str
    """The files as the user named them (for messages)."""
    config: dict[str, Any]
    """The merged, checked document the client is given."""

    @property
    def contexts(self) -> list[str]:
        return [entry["name"] for entry in self.config["contexts"]]

    @property
    def current(self) -> str | None:
        current = self.config.get("current-context")
        return current or None


def files(explicit: Path | None = None) -> str:
    """The kubeconfig to read: the explicit path, else $KUBECONFIG (a ':'-separated list), else ~/.kube/config.
    Read at call time: the client reads $KUBECONFIG once, at import."""
    return str(explicit) if explicit is not None else os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG


def existing(names: str) -> list[Path]:
    """The files of the list that exist: kubectl skips a missing one in $KUBECONFIG."""
    return [path for path in (Path(name).expanduser() for name in filter(None, names.split(os.pathsep)))
            if os.path.lexists(path)]


def read(explicit: Path | None = None) -> Kubeconfig:
    """Every file of the list, each through the gate and checked, merged; its credentials registered for
    redaction before anything can print them."""
    names = files(explicit)
    paths = existing(names)
    if not paths:
        raise InputError(names, "", "cannot read the kubeconfig: no such file (pass --kubeconfig or set "
                         "KUBECONFIG to your clusters' kubeconfig)")
    documents = []
    for path in paths:
        document = parse_yaml(read_text(path, Kind.KUBECONFIG), str(path))
        if document is None:
            continue  # an empty file adds nothing (kubectl)
        redact.register(credentials(document))
        check(document, str(path))
        documents.append(absolute_paths(document, Path(os.path.abspath(path)).parent))
    if not documents:
        raise InputError(names, "", "cannot read the kubeconfig: the file is empty")
    return Kubeconfig(names, merge(documents))


# --- pure ----------------------------------------------------------------------------------------

def credentials(document: Any) -> set[str]:
    """Every credential string in a parsed kubeconfig of any shape (looked for before the shape is checked,
    so that an error about a malformed entry cannot print a well-formed one's token)."""
    found: set[str] = set()
    for entry in _entries(document, "users"):
        user = entry.get("user")
        if not isinstance(user, Mapping):
            continue
        found.update(v for k in SECRET_USER_FIELDS if isinstance(v := user.get(k), str))
        provider = user.get("auth-provider")
        if isinstance(provider, Mapping) and isinstance(provider.get("config"), Mapping):
            found.update(v for v in provider["config"].values() if isinstance(v, str))
        plugin = user.get("exec")
        if isinstance(plugin, Mapping) and isinstance(plugin.get("env"), list):
            found.update(v for e in plugin["env"] if isinstance(e, Mapping) and isinstance(v := e.get("value"), str)
                         and e.get("name") not in PLAIN_EXEC_ENV)
    for entry in _entries(document, "clusters"):
        cluster = entry.get("cluster")
        if isinstance(cluster, Mapping) and isinstance(v := cluster.get("certificate-authority-data"), str):
            found.add(v)
    return found


def _entries(document: Any, key: str) -> Iterator[Mapping[str, Any]]:
    items = document.get(key) if isinstance(document, Mapping) else None
    if isinstance(items, list):
        yield from (item for item in items if isinstance(item, Mapping))


def check(document: Any, source: str) -> None:
    """The shape of a kubeconfig (client-go's clientcmd/api/v1 Config): refused in one line naming the field,
    never its value. A null is taken as absent, as kubectl does."""
    if not isinstance(document, Mapping):
        raise InputError(source, "", "not a kubeconfig (expected a mapping with clusters, contexts and users)")
    current = document.get("current-context")
    if current is not None and not isinstance(current, str):
        raise InputError(source, "current-context", "expected a string")
    for key, inner in LISTS.items():
        _check_list(document.get(key), key, inner, source)


def _check_list(items: Any, key: str, inner: str, source: str) -> None:
    if items is None:
        return
    if not isinstance(items, list):
        raise InputError(source, key, "expected a list of named entries")
    seen: set[str] = set()
    for i, entry in enumerate(items):
        where = f"{key}[{i}]"
        if not isinstance(entry, Mapping):
            raise InputError(source, where, "expected a mapping with name and " + inner)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(source, f"{where}.name", "missing or not a string (every entry needs a name)")
        if name in seen:
            raise InputError(source, f"{where}.name", f"{key} {name!r} is defined twice")
        seen.add(name)
        body = entry.get(inner)
        if not isinstance(body, Mapping):
            raise InputError(source, f"{where}.{inner}", "missing or not a mapping")
        fields = {"cluster": CLUSTER_FIELDS, "context": CONTEXT_FIELDS, "user": USER_FIELDS}[inner]
        _check_fields(body, fields, f"{where}.{inner}", source)
        if inner == "user":
            _check_user(body, f"{where}.{inner}", source)
        server = body.get("server") if inner == "cluster" else None
        if isinstance(server, str) and server and urlsplit(server).scheme.lower() not in ("https", "http"):
            # client-go picks https for a bare host:port; the Python client would dial plain http, the user's
            # credentials in the clear (and urllib3 prints a FutureWarning).
            raise InputError(source, f"{where}.cluster.server", "expected a URL starting with https://")


def _check_fields(body: Mapping[str, Any], fields: Mapping[str, str], where: str, source: str) -> None:
    for field, expected in fields.items():
        value = body.get(field)
        if value is None:
            continue
        ok = {STR: isinstance(value, str), BOOL: isinstance(value, bool), MAP: isinstance(value, Mapping),
              STRS: isinstance(value, list) and all(isinstance(v, str) for v in value)}[expected]
        if not ok:
            raise InputError(source, f"{where}.{field}", f"expected {expected}")


def _check_user(user: Mapping[str, Any], where: str, source: str) -> None:
    provider = user.get("auth-provider")
    if isinstance(provider, Mapping):
        _check_fields(provider, {"name": STR, "config": MAP}, f"{where}.auth-provider", source)
        for key, value in (provider.get("config") or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InputError(source, f"{where}.auth-provider.config", "expected a mapping of strings")
    plugin = user.get("exec")
    if isinstance(plugin, Mapping):
        _check_fields(plugin, EXEC_FIELDS, f"{where}.exec", source)
        if not plugin.get("command"):
            raise InputError(source, f"{where}.exec.command", "missing (the program to run for a credential)")
        env = plugin.get("env")
        if env is not None and not (isinstance(env, list) and all(
                isinstance(e, Mapping) and isinstance(e.get("name"), str) and isinstance(e.get("value"), str)
                for e in env)):
            raise InputError(source, f"{where}.exec.env", "expected a list of {name, value} strings")


def absolute_paths(document: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """A copy of a checked kubeconfig with its relative file paths made absolute against `base`, and its
    nulls dropped (the client would call methods on them)."""
    out = {k: v for k, v in document.items() if v is not None}
    for key, inner in LISTS.items():
        out[key] = [_resolved(entry, inner, base) for entry in document.get(key) or []]
    return out


def _resolved(entry: Mapping[str, Any], inner: str, base: Path) -> dict[str, Any]:
    body = {k: v for k, v in entry[inner].items() if v is not None}
    paths = {"cluster": CLUSTER_PATHS, "user": USER_PATHS}.get(inner, ())
    for key in paths:
        if isinstance(body.get(key), str) and body[key]:
            body[key] = str(base / Path(body[key]).expanduser())
    plugin = body.get("exec")
    if inner == "user" and isinstance(plugin, Mapping) and os.sep in plugin["command"]:
        body["exec"] = {**plugin, "command": str(base / plugin["command"])}
    return {**entry, inner: body}


def merge(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """kubectl's merge of a $KUBECONFIG list: the first file to define a name (a cluster, a context, a user) or
    the current context wins; the rest is added."""
    merged: dict[str, Any] = {k: v for k, v in documents[0].items() if k not in LISTS}
    merged.pop("current-context", None)
    for key in LISTS:
        names: set[str] = set()
        merged[key] = []
        for document in documents:
            for entry in document.get(key) or []:
                if entry["name"] not in names:
                    names.add(entry["name"])
                    merged[key].append(entry)
    current = next((d["current-context"] for d in documents if d.get("current-context")), None)
    if current is not None:
        merged["current-context"] = current
    return merged


def server_of(kubeconfig: Kubeconfig, context: str | None) -> None:
    """Refuse a context whose cluster has no server URL: the client would send its credentials to its default,
    http://localhost, in the clear. Unknown names are left to the client's own message."""
    name = context or kubeconfig.current
    entry = next((c["context"] for c in kubeconfig.config["contexts"] if c["name"] == name), None)
    if entry is None:
        return
    cluster = next((c["cluster"] for c in kubeconfig.config["clusters"] if c["name"] == entry.get("cluster")), None)
    if cluster is not None and not cluster.get("server"):
        raise InputError(kubeconfig.source, f"cluster {entry.get('cluster')}", "no server URL")


def inline_files(config: Mapping[str, Any], context: str | None, source: str) -> dict[str, Any]:
    """A copy of a checked kubeconfig in which the cluster and the user of `context` (else the current context)
    hold the files they name inline (`certificate-authority` as `certificate-authority-data`, `tokenFile` as
    `token`, ...), each read through the gate: a regular file of at most `Kind.CREDENTIAL`'s limit (1 MiB).
    The client would read them with `open().read()`: a FIFO holds the command forever, /dev/zero or a sparse
    file fills the memory. A file that cannot be used is a `KubeconfigError` naming the kubeconfig, the entry
    and the field, never the content. An unknown context is left to the client's own message."""
    name = context or config.get("current-context")
    entry = next((c["context"] for c in config.get("contexts") or [] if c.get("name") == name), None)
    out = dict(config)
    if not isinstance(entry, Mapping):
        return out
    for key, inline in (("clusters", CLUSTER_INLINE), ("users", USER_INLINE)):
        inner = LISTS[key]
        wanted = entry.get(inner)
        out[key] = [{**item, inner: _inlined(item[inner], inline, f"{inner} {wanted}", source)}
                    if item.get("name") == wanted and isinstance(item.get(inner), Mapping) else item
                    for item in config.get(key) or []]
    return out


def _inlined(body: Mapping[str, Any], fields: Mapping[str, str], where: str, source: str) -> dict[str, Any]:
    out = dict(body)
    for field, inline in fields.items():
        path = out.pop(field, None)
        if not isinstance(path, str) or not path or out.get(inline):
            continue  # none, or the inline field is given too and wins (as in the client and client-go)
        try:
            data = read_bytes(Path(path), Kind.CREDENTIAL)
        except InputError as exc:
            raise KubeconfigError(source, f"{where}: {field}", f"{path}: {exc.reason}") from None
        if inline == "token":
            try:
                # client-go trims the file (transport.NewCachedFileTokenSource)
                token = data.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise KubeconfigError(source, f"{where}: {field}", f"{path}: not UTF-8 text") from None
            redact.register([token])
            out[inline] = token
        else:
            encoded = base64.standard_b64encode(data).decode("ascii")
            if field == "client-key":
                redact.register([encoded, data.decode("utf-8", "replace").strip()])
            out[inline] = encoded
    return out
