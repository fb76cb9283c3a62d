"""GCP Compute Engine through google-cloud-compute (REST transport): one insert per node, waited on with
ZoneOperationsClient.wait, labelled so a gang can be found again. An instance's `provider_id` is its name:
that is what instances.get and instances.delete take (the numeric id is not accepted there).

Node names are fixed before the calls (`<gang>-<attempt>-<i>`), which makes a launch idempotent: a retried
insert of a name that exists answers 409 and is taken as done once its labels prove it ours.

Why ZoneOperationsClient.wait and not `operation.result()`: the SDK's poller is built without the client's
options, so it would always poll compute.googleapis.com, whatever endpoint was configured. Every call passes
`retry=None` (the SDK's reads otherwise retry 503s for up to 600 s on their own) and a timeout from the
zone's budget. Credentials: google.auth application default credentials unless the caller passes some.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

import requests
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth import exceptions as gauth_exc
from google.auth.credentials import Credentials
from google.cloud import compute_v1

from geosched.clouds import gcp as gcp_cloud
from geosched.core import catalog
from geosched.core.models import Offering, Pricing, Region
from geosched.providers.base import (
    ATTEMPT_TAG,
    GANG_TAG,
    INDEX_TAG,
    OWNER_TAG,
    AuthError,
    Budget,
    CapacityError,
    CheckItem,
    Instance,
    InstanceState,
    LaunchSpec,
    PriceObservation,
    ProviderError,
    QuotaCheck,
    QuotaError,
    RateError,
    StallError,
    TransientError,
    UnsupportedError,
    admin_sources,
)
from geosched.providers.config import ENV_GCP_ENDPOINT, ENV_GCP_PROJECT
from geosched.providers.gcp_prices import Rates, machine_price, rates
from geosched.providers.launchsettings import SSH_PORT, ondemand_firewalls, ondemand_group
from geosched.providers.launchsettings.gcp import GcpRegionNetwork, GcpSettings, region_network

NAME = gcp_cloud.NAME  # what this cloud offers: geosched.clouds.gcp
T = TypeVar("T")

CAPACITY_CODES = frozenset({"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                            "RESOURCE_POOL_EXHAUSTED", "STOCKOUT"})
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "QUOTA_LIMIT"})
UNSUPPORTED_CODES = frozenset({"UNSUPPORTED_OPERATION", "RESOURCE_NOT_FOUND", "INVALID_FIELD_VALUE",
                               "CONDITION_NOT_MET"})
RATE_CODES = frozenset({"RESOURCE_OPERATION_RATE_EXCEEDED", "RATE_LIMIT_EXCEEDED"})
AUTH_CODES = frozenset({"PERMISSION_DENIED", "FORBIDDEN"})
RATE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})
AUTH_REASONS = frozenset({"forbidden", "insufficientPermissions", "accessNotConfigured", "SERVICE_DISABLED",
                          "authError", "required", "ACCESS_TOKEN_SCOPE_INSUFFICIENT"})

# Catalog GPU name <-> GCE accelerator type, and the regional quota metric each counts against.
ACCELERATORS: Mapping[str, tuple[str, str]] = {
    "A100": ("nvidia-tesla-a100", "NVIDIA_A100_GPUS"),
    "A100-80GB": ("nvidia-a100-80gb", "NVIDIA_A100_80GB_GPUS"),
    "H100": ("nvidia-h100-80gb", "NVIDIA_H100_GPUS"),
    "H100-MEGA": ("nvidia-h100-mega-80gb", "NVIDIA_H100_MEGA_GPUS"),
    "H200": ("nvidia-h200-141gb", "NVIDIA_H200_GPUS"),
    "L4": ("nvidia-l4", "NVIDIA_L4_GPUS"),
    "T4": ("nvidia-tesla-t4", "NVIDIA_T4_GPUS"),
    "V100": ("nvidia-tesla-v100", "NVIDIA_V100_GPUS"),
}
# Compute Engine's service in the Cloud Billing Catalog API.
COMPUTE_SERVICE_ID = "6F81-5844-456A"
GPU_OF_ACCELERATOR = {acc: gpu for gpu, (acc, _) in ACCELERATORS.items()}
# Accelerator-optimized families come with their GPUs; only general-purpose ones (N1) take guestAccelerators.
BUNDLED_FAMILIES = ("a2-", "a3-", "a4-", "g2-", "g4-")
GPU_MACHINE_FILTER = "name eq '(a2|a3|a4|g2|g4)-.*'"
STATES = {"PROVISIONING": InstanceState.PENDING, "STAGING": InstanceState.PENDING,
          "REPAIRING": InstanceState.PENDING, "RUNNING": InstanceState.RUNNING, "STOPPING": InstanceState.STOPPING,
          "SUSPENDING": InstanceState.STOPPING, "TERMINATED": InstanceState.STOPPED,
          "SUSPENDED": InstanceState.STOPPED}
DONE = compute_v1.Operation.Status.DONE
# The project-wide GPU limit (every region, every GPU model, spot included), from projects.get.
GLOBAL_GPU_METRIC = "GPUS_ALL_REGIONS"
# Nodes get the cloud-platform scope; what they may do is the service account's IAM roles (the module gives
# its node account logs and metrics only).
NODE_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
# How long a quota read (regions.get / projects.get: limits and usage in one answer) is reused at most. Limits
# change when someone raises them (minutes to days); usage is read again sooner, after our own launches.
QUOTA_TTL_S = 300.0
# The quota cache's key for the project-wide quotas (region keys are region names).
PROJECT_SCOPE = ""


# --- error classification ---------------------------------------------------------------------------

def classify_operation(code: str, message: str, http_status: int) -> ProviderError:
    """An error a finished operation carries (capacity and quota failures arrive this way)."""
    if code in CAPACITY_CODES:
        return CapacityError(message, code=code)
    if code in QUOTA_CODES:
        return QuotaError(message, code=code, all_regions="_ALL_REGIONS" in message or " globally" in message)
    if code in RATE_CODES:
        return RateError(message, code=code)
    if code in AUTH_CODES:
        return AuthError(message, code=code)
    if code in UNSUPPORTED_CODES:
        return UnsupportedError(message, code=code)
    if http_status >= 500 or http_status == 0:
        return TransientError(message, code=code)
    if http_status == 429:
        return RateError(message, code=code)
    return UnsupportedError(message, code=code)


def classify(exc: Exception, *, mutating: bool, budget: Budget) -> ProviderError:
    """Map a google-cloud-compute / google-auth / requests exception to the taxonomy."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, gexc.GoogleAPICallError):
        reason = _reason(exc)
        status = int(exc.code or 0)
        message = str(exc.message)
        if status == 429 or reason in RATE_REASONS:
            return RateError(message, code=reason or str(status))
        if reason == "quotaExceeded":
            return QuotaError(message, code=reason, all_regions="_ALL_REGIONS" in message)
        if status in (401, 403) or reason in AUTH_REASONS:
            return AuthError(message, code=reason or str(status))
        if status >= 500:
            return TransientError(message, code=reason or str(status))
        if status == 404:
            return UnsupportedError(message, code=reason or "notFound")
        return UnsupportedError(message, code=reason or str(status))
    if isinstance(exc, gauth_exc.DefaultCredentialsError | gauth_exc.RefreshError):
        return AuthError(f"GCP credentials unavailable: {type(exc).__name__}", code=type(exc).__name__)
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        if budget.expired:
            return StallError("zone deadline passed while connecting", code="ConnectTimeout")
        return TransientError("cannot connect to the Compute endpoint", code="ConnectTimeout")
    if isinstance(exc, requests.exceptions.Timeout):
        if mutating or budget.expired:
            return StallError(f"no answer in time ({type(exc).__name__}); outcome unknown", code="Timeout")
        return TransientError("no answer in time", code="Timeout")
    if isinstance(exc, requests.exceptions.ConnectionError | gauth_exc.TransportError):
        if mutating:
            return StallError(f"connection lost ({type(exc).__name__}); outcome unknown", code="ConnectionError")
        return TransientError(f"connection failed: {type(exc).__name__}", code="ConnectionError")
    raise exc


def may_have_created(exc: ProviderError) -> bool:
    """Could an insert that failed with `exc` have created an instance? (Then quotas are read again.)
    Refusals (capacity, quota, unsupported, auth) create nothing; a lost answer may have."""
    return bool(exc.launched) or isinstance(exc, StallError | TransientError | RateError)


def _reason(exc: gexc.GoogleAPICallError) -> str | None:
    for item in exc.errors or ():
        if isinstance(item, Mapping) and item.get("reason"):
            return str(item["reason"])
        code = getattr(item, "code", None)
        if code:
            return str(code)
    return None


# --- pure request building --------------------------------------------------------------------------

def labels(spec: LaunchSpec, index: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """geosched's labels over the network's launch labels: ours win (the owners agree: `check_owner`)."""
    merged = dict(extra or {})
    merged.update({GANG_TAG: spec.gang, OWNER_TAG: spec.owner, ATTEMPT_TAG: spec.token, INDEX_TAG: str(index)})
    return merged


def instance_body(spec: LaunchSpec, index: int, settings: GcpSettings,
                  network: GcpRegionNetwork | None = None, tag: str | None = None) -> compute_v1.Instance:
    """The instances.insert body. With a Terraform network: its network and subnetwork, the firewall tag,
    the compact placement policy when there is one, the node service account, and its launch labels.
    Without one: the default network and `tag`, the target tag of the on-demand firewall rules."""
    zone = spec.zone
    spot = spec.pricing is Pricing.SPOT
    scheduling = compute_v1.Scheduling(
        on_host_maintenance="TERMINATE",  # GPUs cannot live-migrate
        automatic_restart=not spot,
        provisioning_model="SPOT" if spot else "STANDARD",
    )
    if spot:
        scheduling.instance_termination_action = "DELETE"
    body = compute_v1.Instance(
        name=spec.names[index],
        machine_type=f"zones/{zone}/machineTypes/{spec.instance_type}",
        labels=labels(spec, index, network.launch_labels if network is not None else None),
        scheduling=scheduling,
        disks=[compute_v1.AttachedDisk(
            boot=True, auto_delete=True,
            initialize_params=compute_v1.AttachedDiskInitializeParams(source_image=settings.image,
                                                                       disk_size_gb=settings.disk_gb))],
        network_interfaces=[compute_v1.NetworkInterface(
            network=network.network if network is not None else settings.network)],
    )
    # Without an access config a VM has only its internal address, which `instance_from` then lists alone:
    # geosched reaches it from inside the VPC (docs/security.md).
    if (network.public_ips if network is not None else settings.public_ips):
        body.network_interfaces[0].access_configs = [compute_v1.AccessConfig(name="External NAT",
                                                                             type_="ONE_TO_ONE_NAT")]
    if network is None and tag is not None:
        body.tags = compute_v1.Tags(items=[tag])
    if network is not None:
        body.network_interfaces[0].subnetwork = network.subnetwork
        body.tags = compute_v1.Tags(items=[network.firewall_tag])
        body.service_accounts = [compute_v1.ServiceAccount(email=network.service_account_email,
                                                           scopes=list(NODE_SCOPES))]
        if network.placement_policy is not None:
            body.resource_policies = [network.placement_policy]
    if not spec.instance_type.startswith(BUNDLED_FAMILIES):
        accelerator = ACCELERATORS.get(spec.gpu, (spec.gpu, ""))[0]
        body.guest_accelerators = [compute_v1.AcceleratorConfig(
            accelerator_type=f"zones/{zone}/acceleratorTypes/{accelerator}", accelerator_count=spec.gpus)]
    # The guest agent publishes the machine's host keys as guest attributes (namespace hostkeys/), which
    # `host_keys` reads over the API: probes pin them without trusting the network on first use.
    items = [compute_v1.Items(key="enable-guest-attributes", value="TRUE")]
    if spec.ssh_public_key:
        items.append(compute_v1.Items(key="ssh-keys", value=f"{spec.ssh_user}:{spec.ssh_public_key.strip()}"))
    body.metadata = compute_v1.Metadata(items=items)
    return body


def firewall_bodies(owner: str, network: str, admin_cidrs: Sequence[str]) -> tuple[compute_v1.Firewall, ...]:
    """The on-demand firewall rules on `network`, both targeting the store's network tag: SSH (tcp 22) from
    the admin CIDRs, and every protocol from machines with the same tag (probes, NCCL)."""
    ssh, internal = ondemand_firewalls(owner)
    tag = ondemand_group(owner)
    return (
        compute_v1.Firewall(name=ssh, network=network, direction="INGRESS", priority=1000,
                            description=f"geosched store {owner}: SSH from admin CIDRs",
                            source_ranges=list(admin_cidrs), target_tags=[tag],
                            allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=[str(SSH_PORT)])]),
        compute_v1.Firewall(name=internal, network=network, direction="INGRESS", priority=1000,
                            description=f"geosched store {owner}: all traffic between its machines",
                            source_tags=[tag], target_tags=[tag], allowed=[compute_v1.Allowed(I_p_protocol="all")]),
    )


def firewall_drift(have: compute_v1.Firewall, want: compute_v1.Firewall) -> bool:
    """Does an existing rule differ from what geosched wants in what it admits? (Narrowing
    GEOSCHED_ADMIN_CIDRS must narrow an existing rule; the network of a rule cannot change.)"""
    def allowed(rule: compute_v1.Firewall) -> set[tuple[str, tuple[str, ...]]]:
        return {(a.I_p_protocol, tuple(sorted(a.ports))) for a in rule.allowed}
    return (set(have.source_ranges) != set(want.source_ranges) or set(have.source_tags) != set(want.source_tags)
            or set(have.target_tags) != set(want.target_tags) or allowed(have) != allowed(want)
            or bool(have.denied) or have.disabled or have.direction != want.direction)


def network_link(network: str, project: str) -> str:
    """GcpSettings.network as a firewall's network: a bare `global/networks/X` is made project-relative."""
    return f"projects/{project}/{network}" if network.startswith("global/") else network


def quota_verdict(quotas: Iterable[Any], metric: str, need: int, where: str, *, all_regions: bool) -> QuotaCheck:
    """Raise QuotaError when `need` GPUs exceed what `metric` has free among `quotas` (a region's or the
    project's `quotas` list); else say what is free. A global limit (`all_regions`) blocks every region."""
    quota = next((q for q in quotas if q.metric == metric), None)
    if quota is None:
        return QuotaCheck(False, f"{metric} not listed")
    free = float(quota.limit) - float(quota.usage)
    if need > free:
        raise QuotaError(f"Quota '{metric}' exceeded: the gang needs {need} GPUs, {free:g} of {quota.limit:g} "
                         f"free in {where}", code="QUOTA_EXCEEDED", all_regions=all_regions)
    return QuotaCheck(True, f"{metric}: {free:g} of {quota.limit:g} free")


def instance_from(raw: compute_v1.Instance) -> Instance:
    labels_ = dict(raw.labels)
    zone = _last(raw.zone)
    index = labels_.get(INDEX_TAG, "")
    addresses: list[str] = []
    for nic in raw.network_interfaces:
        if nic.network_i_p:
            addresses.append(nic.network_i_p)
        addresses.extend(ac.nat_i_p for ac in nic.access_configs if ac.nat_i_p)
    return Instance(
        provider=NAME,
        provider_id=raw.name,
        name=raw.name,
        region=zone.rsplit("-", 1)[0],
        zone=zone,
        instance_type=_last(raw.machine_type),
        state=STATES.get(raw.status, InstanceState.PENDING),
        gang=labels_.get(GANG_TAG),
        token=labels_.get(ATTEMPT_TAG),
        owner=labels_.get(OWNER_TAG),
        index=int(index) if index.isdigit() else None,
        addresses=tuple(addresses),
        pricing=Pricing.SPOT if raw.scheduling.provisioning_model == "SPOT" else Pricing.ON_DEMAND,
        launched_at=_timestamp(raw.creation_timestamp),
        # Set when the machine last stopped (a spot preemption with action STOP, a person's stop).
        ended_at=_timestamp(raw.last_stop_timestamp) if raw.status in ("TERMINATED", "SUSPENDED") else None,
    )


def _timestamp(text: str) -> float | None:
    """GCE's RFC 3339 `creationTimestamp` (with its offset); None when absent or unreadable."""
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None


log = logging.getLogger(__name__)  # the provisioning log (geosched/providers/provlog.py): each call


class timed(Generic[T]):  # lower case: it is used as a function, `timed(client.insert, ...)`
    """`fn(**kwargs)` with the per-call timeout the budget hands out at call time; `operation` names the call
    for the provisioning log (`InstancesClient.insert`), never its arguments."""

    def __init__(self, fn: Callable[..., T], **kwargs: Any) -> None:
        self.fn, self.kwargs = fn, kwargs
        owner = getattr(fn, "__self__", None)
        self.operation = f"{type(owner).__name__}.{fn.__name__}" if owner is not None else fn.__name__

    def __call__(self, timeout: float) -> T:
        return self.fn(timeout=timeout, **self.kwargs)


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def label_filter(gang: str | None) -> str:
    return f"labels.{GANG_TAG} = {gang}" if gang is not None else f"labels.{GANG_TAG}:*"


# --- the provider -----------------------------------------------------------------------------------

class GcpProvider:
    """Compute Engine in one project; zones are GCE zone names, as in the catalog."""

    def __init__(self, settings: GcpSettings | None = None, credentials: Credentials | None = None) -> None:
        self.settings = settings or GcpSettings()
        self._credentials = credentials
        self._project = self.settings.project
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self._zones: dict[str, tuple[str, ...]] | None = None
        self._firewalls: set[str] = set()  # owners whose on-demand firewall rules are in place
        # What `offerings` found per region (machine specs price by their parts) and the SKU rates, read once.
        self._specs: dict[str, tuple[Offering, ...]] = {}
        self._rates: Rates | None = None
        # Quota pre-check cache, shared by the threads of parallel zone attempts (under `_lock`): a region's
        # `quotas` from regions.get (key: the region) and the project's from projects.get (key PROJECT_SCOPE),
        # with the monotonic time read. Reused for `quota_ttl_s`, and until this provider launches or
        # terminates there (`_usage_changed`); `_quota_epoch` counts those changes so that a read that
        # overlapped one is not stored (it may predate the change).
        self.quota_ttl_s = QUOTA_TTL_S
        self._quota_reads: dict[str, tuple[float, tuple[Any, ...]]] = {}
        self._quota_epoch: dict[str, int] = {}

    @property
    def name(self) -> str:
        return NAME

    # -- plumbing ----------------------------------------------------------------------------------

    def _creds(self) -> tuple[Credentials | None, str]:
        if self._credentials is not None and self._project:
            return self._credentials, self._project
        import google.auth

        try:
            creds, project = google.auth.default(scopes=["https://www.googleapis.com/auth/compute"])
        except gauth_exc.DefaultCredentialsError as exc:
            raise AuthError("no application default credentials: run `gcloud auth application-default login` "
                            "or set GOOGLE_APPLICATION_CREDENTIALS", code=type(exc).__name__) from None
        self._credentials = self._credentials or creds
        self._project = self._project or project
        if not self._project:
            raise AuthError(f"no GCP project: set {ENV_GCP_PROJECT}", code="NoProject")
        return self._credentials, self._project

    def _client(self, kind: str) -> Any:
        with self._lock:
            client = self._clients.get(kind)
            if client is None:
                creds, _ = self._creds()
                options = ClientOptions(api_endpoint=self.settings.endpoint) if self.settings.endpoint else None
                factory = getattr(compute_v1, kind)
                client = factory(credentials=creds, client_options=options, transport="rest")
                self._clients[kind] = client
            return client

    @property
    def project(self) -> str:
        return self._creds()[1]

    def _call(self, budget: Budget, fn: Callable[[float], T], *, mutating: bool = False) -> T:
        if budget.expired:
            raise StallError("zone deadline passed before the call", code="Deadline")
        budget.tick()
        operation = getattr(fn, "operation", "call")
        try:
            answer = fn(budget.timeout())
        except Exception as exc:
            error = classify(exc, mutating=mutating, budget=budget)
            log.warning("gcp %s: %s: %s", operation, error.kind, error)
            raise error from None
        log.debug("gcp %s: ok", operation)
        return answer

    def _zone_index(self, budget: Budget) -> dict[str, tuple[str, ...]]:
        if self._zones is None:
            client = self._client("ZonesClient")
            found: dict[str, list[str]] = {}
            for page in self._list(budget, lambda t: client.list(project=self.project, retry=None, timeout=t)):
                for z in page.items:
                    if z.status == "UP" or not z.status:
                        found.setdefault(_last(z.region), []).append(z.name)
            self._zones = {r: tuple(sorted(zs)) for r, zs in found.items()}
        return self._zones

    def _list(self, budget: Budget, fn: Callable[[float], Any]) -> list[Any]:
        """Pages of a list call; each page is one API call against the budget."""
        pager = self._call(budget, fn)
        out = []
        try:
            for i, page in enumerate(pager.pages):
                if i:
                    budget.tick()
                out.append(page)
        except Exception as exc:
            raise classify(exc, mutating=False, budget=budget) from None
        return out

    # -- what the cloud offers ---------------------------------------------------------------------

    def regions(self, budget: Budget) -> tuple[str, ...]:
        return tuple(sorted(self._zone_index(budget)))

    def zones(self, region: str, budget: Budget) -> tuple[str, ...]:
        return self._zone_index(budget).get(region, ())

    def region_info(self, region: str) -> Region | None:
        return catalog.regions().get(f"{NAME}:{region}")

    def offerings(self, region: str, budget: Budget) -> tuple[Offering, ...]:
        client = self._client("MachineTypesClient")
        zones = set(self.zones(region, budget))
        index = catalog.offering_index()
        out: list[Offering] = []
        request = {"project": self.project, "filter": GPU_MACHINE_FILTER}
        for page in self._list(budget, lambda t: client.aggregated_list(request=request, retry=None, timeout=t)):
            for scope, scoped in page.items.items():
                zone = _last(scope)
                if zone not in zones:
                    continue
                for mt in scoped.machine_types:
                    if not mt.accelerators:
                        continue
                    acc = mt.accelerators[0]
                    gpu = GPU_OF_ACCELERATOR.get(acc.guest_accelerator_type, acc.guest_accelerator_type)
                    shipped = index.get((NAME, mt.name, zone))
                    out.append(Offering(NAME, mt.name, gpu, int(acc.guest_accelerator_count), float(mt.guest_cpus),
                                        mt.memory_mb / 1024.0, region, zone,
                                        shipped.price_ondemand if shipped else None,
                                        shipped.price_spot if shipped else None))
        found = tuple(sorted(out, key=lambda o: (o.zone, o.instance_type)))
        self._specs[region] = found
        return found

    def prices(self, region: str, instance_types: Sequence[str], budget: Budget) -> tuple[PriceObservation, ...]:
        """On-demand and spot prices of the region's GPU machine types, from the Cloud Billing Catalog API's
        Compute Engine SKUs (services.skus.list; read once per provider): each machine priced by its parts
        (`gcp_prices`). A machine whose parts have no SKU there is not recorded: the shipped price stands."""
        table = self._sku_rates(budget)
        now = time.time()
        out = []
        for o in self._specs.get(region, ()):
            if o.instance_type not in instance_types:
                continue
            for pricing in (Pricing.ON_DEMAND, Pricing.SPOT):
                price = machine_price(table, region, o.instance_type, o.gpu, o.gpus, o.vcpus, o.memory_gib, pricing)
                if price is not None:
                    out.append(PriceObservation(NAME, o.instance_type, region, o.zone, pricing, price, now,
                                                "gcp:cloud-billing-catalog"))
        return tuple(out)

    def host_keys(self, instance: Instance, budget: Budget) -> tuple[str, ...]:
        """The host keys the guest agent published as guest attributes (instances.getGuestAttributes, query
        path hostkeys/: one item per key type, its value the base64 blob)."""
        client = self._client("InstancesClient")
        try:
            request = compute_v1.GetGuestAttributesInstanceRequest(
                project=self.project, zone=instance.zone, instance=instance.provider_id, query_path="hostkeys/")
            found = self._call(budget, timed(client.get_guest_attributes, request=request, retry=None))
        except UnsupportedError as exc:
            if exc.code == "notFound":  # not published yet (the guest agent has not run)
                return ()
            raise
        return tuple(f"{item.key} {item.value}" for item in found.query_value.items
                     if item.namespace == "hostkeys" and item.key and item.value)

    def _sku_rates(self, budget: Budget) -> Rates:
        if self._rates is None:
            from google.cloud import billing_v1

            creds, _ = self._creds()
            options = ClientOptions(api_endpoint=self.settings.endpoint) if self.settings.endpoint else None
            client = billing_v1.CloudCatalogClient(credentials=creds, client_options=options, transport="rest")
            skus: list[dict[str, Any]] = []
            request = {"parent": f"services/{COMPUTE_SERVICE_ID}", "page_size": 5000, "currency_code": "USD"}
            for page in self._list(budget, lambda t: client.list_skus(request=request, retry=None, timeout=t)):
                skus.extend(type(sku).to_dict(sku, preserving_proto_field_name=False) for sku in page.skus)
            self._rates = rates(skus)
        return self._rates

    def check_quota(self, spec: LaunchSpec, budget: Budget) -> QuotaCheck:
        """The region's GPU metric (PREEMPTIBLE_* for spot) from regions.get, then the project's
        GPUS_ALL_REGIONS from projects.get; a gang that exceeds the second is a global QuotaError."""
        need = spec.gpus * spec.count
        checks: list[QuotaCheck] = []
        metric = ACCELERATORS.get(spec.gpu, ("", ""))[1]
        if metric:
            if spec.pricing is Pricing.SPOT:
                metric = f"PREEMPTIBLE_{metric}"
            regions = self._client("RegionsClient")
            region_quotas = self._quotas(spec.region, budget, lambda t: regions.get(
                project=self.project, region=spec.region, retry=None, timeout=t).quotas)
            checks.append(quota_verdict(region_quotas, metric, need, f"region {spec.region}", all_regions=False))
        else:
            checks.append(QuotaCheck(False, f"no quota metric known for GPU {spec.gpu}"))
        projects = self._client("ProjectsClient")
        project_quotas = self._quotas(PROJECT_SCOPE, budget, lambda t: projects.get(
            project=self.project, retry=None, timeout=t).quotas)
        checks.append(quota_verdict(project_quotas, GLOBAL_GPU_METRIC, need, "all regions", all_regions=True))
        return QuotaCheck(any(c.known for c in checks), "; ".join(c.detail for c in checks))

    def _quotas(self, scope: str, budget: Budget, read: Callable[[float], Iterable[Any]]) -> tuple[Any, ...]:
        """The `quotas` list of a region (scope: its name) or of the project (PROJECT_SCOPE), from the cache
        when fresh; else `read` once (counted on `budget`). Concurrent misses may both read."""
        with self._lock:
            epoch = self._quota_epoch.get(scope, 0)
            hit = self._quota_reads.get(scope)
        if hit is not None and time.monotonic() - hit[0] < self.quota_ttl_s:
            return hit[1]
        quotas = tuple(self._call(budget, read))
        with self._lock:
            if self._quota_epoch.get(scope, 0) == epoch:  # no launch or terminate of ours overlapped the read
                self._quota_reads[scope] = (time.monotonic(), quotas)
        return quotas

    def _usage_changed(self, regions: Iterable[str]) -> None:
        """This provider launched or terminated in `regions`: their quotas and the project's (whose
        GPUS_ALL_REGIONS counts every region) are read again by the next pre-check."""
        with self._lock:
            for scope in (*regions, PROJECT_SCOPE):
                self._quota_epoch[scope] = self._quota_epoch.get(scope, 0) + 1
                self._quota_reads.pop(scope, None)

    # -- how to launch there -----------------------------------------------------------------------

    def network(self, region: str, zone: str) -> GcpRegionNetwork | None:
        """The Terraform network a launch in `zone` uses; None without a config. Refused before any call when
        the config does not cover the zone or puts it in another project than the one configured."""
        config = self.settings.terraform
        if config is None:
            return None
        net = region_network(config, region)
        if net is None or net.subnet_for(zone) is None:
            raise UnsupportedError(f"zone {zone}: no subnet in the Terraform output {config.source}",
                                   code="NoSubnet", region_wide=net is None)
        if net.project != self.project:
            # Not retryable anywhere in this provider: every insert would name a network of another project.
            raise AuthError(f"the Terraform output {config.source} builds {region} in project {net.project}, but "
                            f"geosched is configured for project {self.project} ({ENV_GCP_PROJECT} or the "
                            "application default credentials)", code="ProjectMismatch")
        return net

    def launch(self, spec: LaunchSpec, budget: Budget) -> tuple[Instance, ...]:
        net = self.network(spec.region, spec.zone)
        tag = self.firewalls(spec.owner, budget) if net is None else None
        client = self._client("InstancesClient")
        accepted: list[tuple[str, str]] = []  # (name, operation name) of inserts the API took
        failure: ProviderError | None = None
        for i, name in enumerate(spec.names):
            body = instance_body(spec, i, self.settings, net, tag)
            try:
                op = self._call(budget, timed(client.insert, project=self.project, zone=spec.zone,
                                              instance_resource=body, retry=None), mutating=True)
            except UnsupportedError as exc:
                refusal: ProviderError = exc
                try:
                    ours = exc.code == "alreadyExists" and self._ours(spec, name, budget)
                except ProviderError as lookup:
                    ours, refusal = False, lookup
                if not ours:
                    failure = refusal
                    break
                accepted.append((name, ""))
                continue
            except StallError as exc:
                # The insert may or may not happen yet: it is not "launched" (a delete now would find nothing
                # and close its row), its intent stays open and reconciliation looks for it by name.
                failure = exc
                break
            except ProviderError as exc:
                failure = exc
                break
            if op.status == DONE and op.error.errors:
                failure = classify_operation(op.error.errors[0].code, op.error.errors[0].message,
                                             int(op.http_error_status_code or 0))
                break
            accepted.append((name, "" if op.status == DONE else op.name))
        done: list[str] = []
        for name, op_name in accepted:
            if not op_name:
                done.append(name)
                continue
            try:
                error = self._wait(spec.zone, op_name, budget)
            except ProviderError as exc:
                failure = failure or exc
                done.append(name)  # still being created: it has to be rolled back
                continue
            if error is None:
                done.append(name)
            else:
                failure = failure or error
        launched = self._by_token(spec, budget, done) if done else ()
        if accepted or (failure is not None and may_have_created(failure)):
            # After the inserts and waits, not before: a quota read that overlapped them must not be reused.
            self._usage_changed((spec.region,))
        if failure is not None:
            raise failure.with_launched(launched)
        return launched

    # -- the on-demand firewall rules (no Terraform network) -----------------------------------------

    def firewalls(self, owner: str, budget: Budget) -> str:
        """Ensure the store's two firewall rules exist on the configured network as `firewall_bodies` says
        (inserted if missing, replaced if they admit something else), and return the network tag instances
        need. Idempotent and safe against a racing process (409 on insert is taken as done); once per
        provider and owner; every call counted on `budget`."""
        with self._lock:
            if owner in self._firewalls:
                return ondemand_group(owner)
        sources = admin_sources(self.settings.admin_cidrs)
        network = network_link(self.settings.network, self.project)
        for want in firewall_bodies(owner, network, sources):
            try:
                self._ensure_firewall(want, budget)
            except ProviderError as exc:
                if isinstance(exc, UnsupportedError):
                    exc.region_wide = True  # every zone launches behind these rules
                raise exc.with_context(f"on-demand firewall rule {want.name}") from None
        with self._lock:
            self._firewalls.add(owner)
        return ondemand_group(owner)

    def _ensure_firewall(self, want: compute_v1.Firewall, budget: Budget) -> None:
        client = self._client("FirewallsClient")
        have = self._get_firewall(want.name, budget)
        if have is None:
            try:
                op = self._call(budget, timed(client.insert, project=self.project, firewall_resource=want,
                                              retry=None))
            except UnsupportedError as exc:
                if exc.code != "alreadyExists":
                    raise
                have = self._get_firewall(want.name, budget)  # another process inserted it first
                if have is None:
                    raise TransientError(f"{want.name} exists but is not visible yet", code=exc.code) from None
            else:
                self._finish_global(op, budget)
                return
        if have is not None and firewall_drift(have, want):
            # A full replacement (update, not patch: a patch cannot clear a list), on the rule's own network.
            body = compute_v1.Firewall(want)
            body.network = have.network or want.network
            op = self._call(budget, timed(client.update, project=self.project, firewall=want.name,
                                          firewall_resource=body, retry=None))
            self._finish_global(op, budget)

    def _get_firewall(self, name: str, budget: Budget) -> compute_v1.Firewall | None:
        client = self._client("FirewallsClient")
        try:
            rule: compute_v1.Firewall = self._call(budget, lambda t: client.get(project=self.project, firewall=name,
                                                                               retry=None, timeout=t))
        except UnsupportedError as exc:
            if exc.code == "notFound":
                return None
            raise
        return rule

    def _finish_global(self, op: Any, budget: Budget) -> None:
        """Wait for a global operation (GlobalOperationsClient.wait at the configured endpoint, for the same
        reason as zone operations) and raise its error, if any."""
        ops = self._client("GlobalOperationsClient")
        name = op.name
        while op.status != DONE:
            op = self._call(budget, timed(ops.wait, project=self.project, operation=name, retry=None))
            if op.status != DONE and budget.expired:
                raise StallError(f"operation {name} still running at the zone deadline", code="OperationTimeout")
        if op.error.errors:
            first = op.error.errors[0]
            raise classify_operation(first.code, first.message, int(op.http_error_status_code or 0))

    def _ours(self, spec: LaunchSpec, name: str, budget: Budget) -> bool:
        client = self._client("InstancesClient")
        inst = self._call(budget, lambda t: client.get(project=self.project, zone=spec.zone, instance=name,
                                                       retry=None, timeout=t))
        return dict(inst.labels).get(ATTEMPT_TAG) == spec.token

    def _wait(self, zone: str, operation: str, budget: Budget) -> ProviderError | None:
        """Wait for a zone operation; its error (if any) as a taxonomy error. StallError when the budget ends
        first (the server's own wait returns after about two minutes, so this loops)."""
        ops = self._client("ZoneOperationsClient")
        while True:
            op = self._call(budget, lambda t: ops.wait(project=self.project, zone=zone, operation=operation,
                                                       retry=None, timeout=t))
            if op.status == DONE:
                if op.error.errors:
                    first = op.error.errors[0]
                    return classify_operation(first.code, first.message, int(op.http_error_status_code or 0))
                return None
            if budget.expired:
                raise StallError(f"operation {operation} still running at the zone deadline", code="OperationTimeout")

    def _by_token(self, spec: LaunchSpec, budget: Budget, names: Sequence[str]) -> tuple[Instance, ...]:
        """Instances of this attempt as the API reports them (ids, addresses); a name the API does not list
        (an insert whose outcome is unknown) is reported as pending so it gets rolled back by name."""
        client = self._client("InstancesClient")
        flt = f"labels.{ATTEMPT_TAG} = {spec.token}"
        try:
            pages = self._list(budget, lambda t: client.list(request={"project": self.project, "zone": spec.zone,
                                                                      "filter": flt}, retry=None, timeout=t))
            found = {i.name: instance_from(i) for page in pages for i in page.items}
        except ProviderError:
            found = {}
        out = []
        for i, name in enumerate(spec.names):
            if name in found:
                out.append(found[name])
            elif name in names:
                out.append(Instance(NAME, name, name, spec.region, spec.zone, spec.instance_type,
                                    InstanceState.PENDING, spec.gang, spec.token, spec.owner, i, (), spec.pricing))
        return tuple(out)

    def describe(self, gang: str | None, regions: Iterable[str], budget: Budget) -> tuple[Instance, ...]:
        wanted = set(regions)
        client = self._client("InstancesClient")
        request = {"project": self.project, "filter": label_filter(gang)}
        out = []
        for page in self._list(budget, lambda t: client.aggregated_list(request=request, retry=None, timeout=t)):
            for scoped in page.items.values():
                for raw in scoped.instances:
                    inst = instance_from(raw)
                    if not wanted or inst.region in wanted:
                        out.append(inst)
        return tuple(out)

    def terminate(self, instances: Sequence[Instance], budget: Budget) -> None:
        try:
            self._terminate(instances, budget)
        finally:  # even a failed terminate may have released some (a rolled-back gang's GPUs)
            self._usage_changed({inst.region for inst in instances})

    def _terminate(self, instances: Sequence[Instance], budget: Budget) -> None:
        client = self._client("InstancesClient")
        pending: list[tuple[str, str]] = []
        for inst in instances:
            try:
                op = self._call(budget, timed(client.delete, project=self.project, zone=inst.zone,
                                              instance=inst.name, retry=None))
            except UnsupportedError as exc:
                if exc.code == "notFound":
                    continue
                raise
            if op.status == DONE and op.error.errors:
                first = op.error.errors[0]
                raise classify_operation(first.code, first.message, int(op.http_error_status_code or 0))
            if op.status != DONE:
                pending.append((inst.zone, op.name))
        for zone, op_name in pending:
            error = self._wait(zone, op_name, budget)
            if error is not None:
                raise error

    def check(self) -> tuple[CheckItem, ...]:
        items = []
        try:
            creds, project = self._creds()
            kind = type(creds).__name__ if creds is not None else "none"
            items.append(CheckItem(NAME, "credentials", True, f"found ({kind})"))
            items.append(CheckItem(NAME, "project", True, project))
        except AuthError as exc:
            items.append(CheckItem(NAME, "credentials", False, exc.message))
            return tuple(items)
        endpoint = self.settings.endpoint
        items.append(CheckItem(NAME, "endpoint", True, endpoint or f"default (set {ENV_GCP_ENDPOINT} to change)"))
        try:
            regions = self.regions(Budget(20.0, 10.0))
            items.append(CheckItem(NAME, "api", True, f"Compute answered: {len(regions)} regions"))
        except ProviderError as exc:
            items.append(CheckItem(NAME, "api", False, f"{exc.kind}: {exc}"))
        return tuple(items)


# The provider geosched.providers.registry builds for this cloud, from its launch settings (GcpSettings).
PROVIDER = GcpProvider
