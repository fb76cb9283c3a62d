"""Several emulated clusters and one kubeconfig with a context per cluster."""

from __future__ import annotations

import secrets
import shutil
import string
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

import kubernetes
import yaml

from .cluster import EmulatedCluster


def cluster_names(n: int) -> list[str]:
    """cluster-a ... cluster-z, then cluster-aa, cluster-ab, ..."""
    names = []
    for i in range(n):
        suffix, k = "", i + 1
        while k:
            k, rem = divmod(k - 1, 26)
            suffix = string.ascii_lowercase[rem] + suffix
        names.append(f"cluster-{suffix}")
    return names


def kubeconfig_dict(clusters: Sequence[EmulatedCluster], *, current: str | None = None,
                    namespace: str = "default") -> dict[str, Any]:
    """One cluster, user and context per emulated cluster, all named after it; the user carries its token."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": c.name, "cluster": {"server": c.url}} for c in clusters],
        "users": [{"name": f"{c.name}-admin", "user": {"token": c.token} if c.token else {}} for c in clusters],
        "contexts": [{"name": c.name, "context": {"cluster": c.name, "user": f"{c.name}-admin",
                                                  "namespace": namespace}} for c in clusters],
        "current-context": current or (clusters[0].name if clusters else ""),
    }


def write_kubeconfig(clusters: Sequence[EmulatedCluster], path: Path, *, current: str | None = None) -> Path:
    path.write_text(yaml.safe_dump(kubeconfig_dict(clusters, current=current), sort_keys=False), encoding="utf-8")
    path.chmod(0o600)
    return path


class MultiCluster:
    """N emulated clusters (`cluster-a`, `cluster-b`, ...) and a kubeconfig at `.kubeconfig` naming them all.

    Each cluster requires its own bearer token (written into the kubeconfig), so a request that reaches the
    wrong cluster is a 401, not a silent success."""

    def __init__(self, n: int = 3, *, names: Sequence[str] | None = None, directory: Path | None = None,
                 event_window: int = 10_000) -> None:
        self.names = list(names) if names is not None else cluster_names(n)
        self.clusters = [EmulatedCluster(name, token=f"kubeemu-{name}-{secrets.token_hex(8)}",
                                         event_window=event_window) for name in self.names]
        self._own_dir = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="kubeemu-")) if directory is None else directory
        self.kubeconfig = self.directory / "kubeconfig"

    def __enter__(self) -> Self:
        try:
            for cluster in self.clusters:
                cluster.start()
            write_kubeconfig(self.clusters, self.kubeconfig)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for cluster in self.clusters:
            cluster.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __getitem__(self, key: int | str) -> EmulatedCluster:
        if isinstance(key, int):
            return self.clusters[key]
        for cluster in self.clusters:
            if cluster.name == key:
                return cluster
        raise KeyError(key)

    def __iter__(self) -> Iterator[EmulatedCluster]:
        return iter(self.clusters)

    def __len__(self) -> int:
        return len(self.clusters)

    def api_client(self, context: str) -> kubernetes.client.ApiClient:
        """The official client configured from the kubeconfig only, for one context. Close it when done."""
        client = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), context=context)
        return cast(kubernetes.client.ApiClient, client)
