"""`geosched multikueue dispatch`: parses arguments, builds the Dispatcher, runs it. Exit codes: 0 done; 1 another
replica holds the lease, or it cannot be had at all (its namespace is missing, RBAC denies it: said so) (`--once`);
2 bad input (a setting, a kubeconfig, Kueue not installed)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from geosched.console.options import (
    CarbonBasisOpt,
    CarbonHourlyOpt,
    CarbonWeightOpt,
    CostWeightOpt,
    GridZonesOpt,
    NetworkWeightOpt,
    known_policy,
)
from geosched.kube.cli import KubeconfigOpt

if TYPE_CHECKING:
    from geosched.core.models import Weights


def dispatcher_weights(configured: Weights | None, flags: dict[str, float], given: set[str]) -> Weights:
    """The dispatcher's weights: a DispatcherConfig's (`--config`), except those given as a flag or variable;
    without a DispatcherConfig, the options' values (flag, variable, the user's config file, the default)."""
    from geosched.core.models import Weights
    if configured is None:
        return replace(Weights(), **flags)
    return replace(configured, **{name: value for name, value in flags.items() if name in given})


def make_app(home: Callable[[], Path | None]) -> typer.Typer:
    from geosched.console.options import DEFAULT_WEIGHTS
    from geosched.grid.formats import Basis
    app = typer.Typer(no_args_is_help=True, help="geosched as MultiKueue's dispatcher (Kueue's "
                      "multiKueue.dispatcherName): it chooses each pending Workload's worker clusters.")

    @app.command("dispatch")
    def dispatch(
        ctx: typer.Context,
        context: Annotated[str | None, typer.Option("--context", help="The manager cluster's kubeconfig "
                                                    "context.")] = None,
        kubeconfig: KubeconfigOpt = None,
        in_cluster: Annotated[bool, typer.Option(help="Use the pod's service account (inside the manager).")]
        = False,
        config: Annotated[Path | None, typer.Option("--config", help="DispatcherConfig YAML (the deploy "
                                                    "ConfigMap).")] = None,
        once: Annotated[bool, typer.Option("--once", help="One pass, then exit.")] = False,
        nominate: Annotated[int | None, typer.Option(min=1, max=20, help="Nominate the K best clusters.")] = None,
        renominate_after: Annotated[float | None, typer.Option(
            min=0.001, help="Seconds without admission before the next best cluster is added.")] = None,
        dispatcher_name: Annotated[str | None, typer.Option(help="The name Kueue's multiKueue.dispatcherName "
                                                            "must give.")] = None,
        policy: Annotated[str | None, typer.Option(help="Placement policy.", callback=known_policy)] = None,
        network_weight: NetworkWeightOpt = DEFAULT_WEIGHTS.network,
        cost_weight: CostWeightOpt = DEFAULT_WEIGHTS.cost,
        carbon_weight: CarbonWeightOpt = DEFAULT_WEIGHTS.carbon,
        network: Annotated[Path | None, typer.Option("--network", help="NetworkView file (geosched snapshot "
                                                     "export / probe export), re-read when it changes.")] = None,
        store_network: Annotated[bool, typer.Option("--store-network", help="The store's measured network.")]
        = False,
        record: Annotated[bool, typer.Option("--record/--no-record", help="Record each decision in the store.")]
        = True,
        metrics_port: Annotated[int | None, typer.Option(min=1, max=65535, help="Serve Prometheus metrics on "
                                                         "this port.")] = None,
        metrics_address: Annotated[str, typer.Option(help="Address of the metrics endpoint.")] = "127.0.0.1",
        leader_elect: Annotated[bool | None, typer.Option(
            "--leader-elect/--no-leader-elect", help="Hold a Lease so only one replica writes (default: the "
            "config's, else on).")] = None,
        lease_namespace: Annotated[str | None, typer.Option(help="Namespace of the Lease.")] = None,
        carbon_hourly: CarbonHourlyOpt = None,
        carbon_basis: CarbonBasisOpt = Basis.LIFECYCLE,
        grid_zones: GridZonesOpt = None,
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    ) -> None:
        """Nominate worker clusters for pending MultiKueue Workloads, until SIGTERM or Ctrl-C (or once). With
        --carbon-hourly, a Workload whose pod templates declare slack (geosched.io/runtime with start-within or
        deadline) is nominated at the start hour it chooses, never after its latest start."""
        from geosched.console import redact, render
        from geosched.console.options import given
        from geosched.core.errors import InputError
        from geosched.grid.carbon import load_grid
        from geosched.kube.cli import _errors
        from geosched.kube.client import Kube
        from geosched.kube.multikueue.dispatcher import Dispatcher
        from geosched.kube.multikueue.metrics import Metrics
        from geosched.kube.multikueue.settings import DispatcherSettings, load_settings
        from geosched.kube.scheduler import FileNetwork, StoreNetwork, no_network
        from geosched.store.db import Store

        with _errors(context, in_cluster), ExitStack() as stack:
            if context is None and not in_cluster:
                raise InputError("--context", "", "required (or --in-cluster inside the manager cluster)")
            if network is not None and store_network:
                raise InputError("--network", "", "give --network or --store-network, not both")
            s = load_settings(config) if config is not None else DispatcherSettings()
            election = s.leader_election
            if leader_elect is not None:
                election = replace(election, enabled=leader_elect)
            if lease_namespace is not None:
                election = replace(election, namespace=lease_namespace)
            flags = {"network": network_weight, "cost": cost_weight, "carbon": carbon_weight}
            s = replace(s, leader_election=election, nominate=nominate or s.nominate,
                        renominate_after_s=renominate_after or s.renominate_after_s,
                        dispatcher_name=dispatcher_name or s.dispatcher_name,
                        policy=policy if policy is not None and (config is None or given(ctx, "policy")) else s.policy,
                        weights=dispatcher_weights(s.weights if config is not None else None, flags,
                                                   {n for n in flags if given(ctx, f"{n}_weight")}))
            source = (FileNetwork(network) if network is not None
                      else StoreNetwork(home()) if store_network else no_network)
            from geosched.console import logs

            logs.daemon(verbose)
            redact.scrub_logging()  # no credential in a log line, whichever library wrote it
            metrics = Metrics()
            if metrics_port is not None:
                metrics.serve(metrics_port, metrics_address)
                stack.callback(metrics.close)
            store = stack.enter_context(Store(home())) if record else None
            kube = stack.enter_context(Kube.open(context, kubeconfig, in_cluster=in_cluster))
            recorder = store.record_placements if store is not None else None
            grid = load_grid(carbon_hourly, carbon_basis, zone_map=grid_zones) if carbon_hourly else None
            dispatcher = stack.enter_context(Dispatcher(kube, s, network=source, metrics=metrics, recorder=recorder,
                                                        grid=grid))
            if once:
                written = dispatcher.run_once()
                render.err.print(f"nominated {len(written)} Workload(s)", markup=False)
                return
            stop = threading.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
            dispatcher.run(stop)
        counts = metrics.stats.outcomes
        render.err.print(f"stopped: {counts['nominated']} nominated, {counts['renominated']} renominated, "
                         f"{counts['no_fit']} not nominated", markup=False)

    return app

