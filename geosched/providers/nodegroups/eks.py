"""The boto3 edge of node groups: EKS DescribeCluster, CreateNodegroup, DescribeNodegroup, DeleteNodegroup,
ListNodegroups, and EC2 DescribeSubnets for the cluster's subnets; for a gang whose instance type a cluster
placement group takes (`spec.cluster_placement`), EC2 CreatePlacementGroup and CreateLaunchTemplate before the
group and DeleteLaunchTemplate and DeletePlacementGroup once it is gone (`release`). SDK types stay here; errors
leave as the provider taxonomy (`base.ProviderError` classes), through the EC2 classifier plus EKS's own codes.

Endpoint, region chain and credentials come from boto3's standard configuration (as `aws.py`); botocore's retries
are off so the retry policy decides. Every call counts on the `Budget` it is given and refuses to start past its
deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import boto3  # type: ignore[import-untyped]
import botocore.exceptions as bex  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]

from geosched.providers import aws
from geosched.providers.base import (
    GANG_TAG,
    OWNER_TAG,
    AuthError,
    Budget,
    CapacityError,
    ProviderError,
    QuotaError,
    StallError,
    TransientError,
    UnsupportedError,
)
from geosched.providers.nodegroups import backend, spec
from geosched.providers.nodegroups.backend import Block, InUse, Pool, RecordBlock, RefusedRequest, Target
from geosched.providers.nodegroups.spec import Cluster, Subnet
from geosched.providers.plan import Plan, Skipped

T = TypeVar("T")
log = logging.getLogger(__name__)
# EKS API reference, "Common Errors" and each action's errors: what they mean for failover.
NOT_FOUND = "ResourceNotFoundException"
# EC2 API reference, "Error codes": a part already made (a create retried after its answer was lost: the name
# holds the store's owner id and the attempt, so it is this attempt's), a part already gone, a placement group
# that still holds instances (the group's last ones terminating: retried in place).
PG_EXISTS = "InvalidPlacementGroup.Duplicate"
PG_GONE = "InvalidPlacementGroup.Unknown"
PG_IN_USE = "InvalidPlacementGroup.InUse"
LT_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"
LT_GONE = frozenset({"InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound"})
IN_USE = "ResourceInUseException"
# A Capacity Block that starts later than this from the create gets its group at 0 nodes and scheduled scaling.
LATER_THAN_S = 3600.0
REQUEST_CODES = frozenset({"InvalidParameterException", "InvalidRequestException", "ClientException"})
EKS_CODES: dict[str, type[ProviderError]] = {
    "ResourceLimitExceededException": QuotaError,
    "UnsupportedAvailabilityZoneException": UnsupportedError,
    "InsufficientCapacityException": CapacityError,
    "ServerException": TransientError,
    "ServiceUnavailableException": TransientError,
}


class Eks:
    """One region's EKS and EC2 clients for node groups: the EKS `backend.Backend`. `node_role` (the IAM role ARN
    the nodes run as) is needed only to create a group."""

    provider = spec.PROVIDER
    cloud = "EKS"
    scope = "region"
    kind = "node group"

    def __init__(self, region: str, session: Any | None = None, call_timeout_s: float = 30.0, *,
                 node_role: str | None = None, capacity_block: spec.CapacityBlock | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.region = region
        self.node_role = node_role
        # Every group on a Capacity Block bought for it in its zone (the user consented to buy: the CLI's check).
        self.capacity_block = capacity_block
        self._clock = clock
        self._bought: str | None = None  # the Capacity Block this run bought: at most one per run
        self._session = session or boto3.session.Session()
        self._config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=call_timeout_s,
                              connect_timeout=min(10.0, call_timeout_s))
        self._eks = self._session.client("eks", region_name=region, config=self._config)
        self._ec2_client: Any = None  # only reading a cluster needs EC2: made then (a client costs ~0.3-1 s)
        self._autoscaling_client: Any = None  # only a block that starts later needs it

    @property
    def _ec2(self) -> Any:
        if self._ec2_client is None:
            self._ec2_client = self._session.client("ec2", region_name=self.region, config=self._config)
        return self._ec2_client

    @property
    def _autoscaling(self) -> Any:
        if self._autoscaling_client is None:
            self._autoscaling_client = self._session.client("autoscaling", region_name=self.region,
                                                            config=self._config)
        return self._autoscaling_client

    @staticmethod
    def default_region() -> str | None:
        """The region boto3's standard configuration names (AWS_DEFAULT_REGION, AWS_REGION, ~/.aws/config)."""
        region = boto3.session.Session().region_name
        return str(region) if region else None

    def cluster(self, name: str, budget: Budget) -> Cluster | None:
        """The cluster and its subnets by zone, or None when the region has no such cluster."""
        try:
            raw = _call(budget, lambda: self._eks.describe_cluster(name=name)["cluster"])
        except _Missing:
            return None
        vpc = raw.get("resourcesVpcConfig") or {}
        ids = list(vpc.get("subnetIds") or [])
        vpc_id = str(vpc.get("vpcId") or "")
        found: list[dict[str, Any]] = []
        if ids:
            # The cluster's subnets, within its VPC when EKS says which (DescribeCluster resourcesVpcConfig.vpcId).
            filters = [{"Name": "vpc-id", "Values": [vpc_id]}] if vpc_id else []
            found = _call(budget, lambda: self._ec2.describe_subnets(SubnetIds=ids, Filters=filters)["Subnets"])
        by_id = {s["SubnetId"]: Subnet(s["SubnetId"], s["AvailabilityZoneId"], s["AvailabilityZone"]) for s in found}
        vpc_id = vpc_id or next((str(s["VpcId"]) for s in found), "")
        # The cluster's own order: the first subnet of a zone is the one a group goes into.
        return Cluster(name, self.region, vpc_id, tuple(by_id[i] for i in ids if i in by_id))

    def unusable(self, cluster: Cluster) -> str | None:
        if not cluster.subnets:
            return (f"EKS cluster {cluster.name!r} lists no subnet geosched can read "
                    "(resourcesVpcConfig.subnetIds)")
        return None

    def targets(self, plan: Plan, cluster: Cluster) -> tuple[tuple[spec.Target, ...], tuple[Skipped, ...]]:
        found, skipped = spec.targets(plan, cluster)
        if self.capacity_block is not None:
            found = tuple(replace(t, block=self.capacity_block) for t in found)
        return found, skipped

    def size_problem(self, nodes: int) -> str | None:
        return spec.size_problem(nodes)

    def create(self, target: Target, *, gang: str, seq: int, owner: str, token: str, nodes: int,
               budget: Budget, record: RecordBlock | None = None) -> Pool:
        assert isinstance(target, spec.Target)
        if self.node_role is None:
            raise RefusedRequest("no node role: an EKS node group needs the IAM role ARN its nodes run as",
                                 code="NoNodeRole")
        name = spec.group_name(gang, seq)
        tag_map = spec.tags(gang, owner, token)
        note = None
        template: tuple[str, int] | None = None
        dates: tuple[float | None, float | None] = (None, None)
        if target.block is not None:
            reservation, note, dates = self._block(target, target.block, nodes, tag_map, budget,
                                                   record or _unrecorded)
            block_parts = spec.Parts(spec.part_name(owner, name), placement=False)
            template = self._make_template(spec.block_template_request(
                block_parts, reservation, target.candidate.instance_type, tag_map), block_parts, budget)
        else:
            parts = spec.parts(target.candidate.instance_type, nodes, owner, name)
            template = None if parts is None else self._make_parts(parts, tag_map, budget)
        # A block that starts more than an hour from now (EC2 sells most from 11:30 UTC on a later day): the group
        # is made at 0 nodes and scaled at the block's start (`schedule`). One within the hour gets the group at
        # full size at once, as before: its start passes while EKS creates the group, and EC2 Auto Scaling refuses
        # a scheduled action in the past (API reference, PutScheduledUpdateGroupAction).
        start, end = dates
        later = start is not None and end is not None and start > self._clock() + LATER_THAN_S
        request = spec.create_request(target, gang=gang, seq=seq, owner=owner, token=token, nodes=nodes,
                                      node_role=self.node_role, launch_template=template, later=later)
        try:
            made = pool(_call(budget, lambda: self._eks.create_nodegroup(**request)["nodegroup"], mutating=True))
        except InUse as exc:
            # A retry of a create EKS accepted (a 5xx or a throttle answered after the write): launch adopts the
            # group if it is this attempt's, and it needs the block's dates to schedule its scaling, as below.
            if target.block is not None:
                exc.planned = Pool(name, backend.CREATING, note=note, starts_at=start, ends_at=end)
            raise
        made = made if note is None else replace(made, note=note)
        return replace(made, starts_at=start, ends_at=end) if later else made

    def schedule(self, made: Pool, *, cluster: str, owner: str, nodes: int, budget: Budget) -> str:
        """The group's Auto Scaling group (DescribeNodegroup resources.autoScalingGroups, which EKS fills once the
        group is ACTIVE) gets two one-time scheduled actions (`spec.schedule_requests`): `nodes` at the block's
        start, 0 `spec.STOP_BEFORE_END_S` before its end. Put again on a retry: PutScheduledUpdateGroupAction
        creates or updates the action of that name. Deleting the group deletes its Auto Scaling group and, with
        it, the actions; `release` deletes any left by name."""
        assert made.starts_at is not None and made.ends_at is not None
        group = _call(budget, lambda: self._eks.describe_nodegroup(clusterName=cluster,
                                                                   nodegroupName=made.name)["nodegroup"])
        asgs = [str(a["name"]) for a in (group.get("resources") or {}).get("autoScalingGroups") or [] if a.get("name")]
        if not asgs:
            raise TransientError(f"node group {made.name} ACTIVE but EKS names no Auto Scaling group yet",
                                 code="NoAutoScalingGroup")
        plan = spec.Schedule(made.starts_at, made.ends_at, nodes)
        for asked in spec.schedule_requests(asgs[0], owner, made.name, plan):
            _call(budget, partial(self._autoscaling.put_scheduled_update_group_action, **asked), mutating=True)
        return (f"0 nodes until {_utc(plan.start)}, then {nodes} (scheduled action on Auto Scaling group "
                f"{asgs[0]}), 0 again from {_utc(plan.stop)} ({spec.STOP_BEFORE_END_S // 60} min before the block "
                f"ends at {_utc(plan.end)})")

    def _block(self, target: spec.Target, block: spec.CapacityBlock, nodes: int, tag_map: Mapping[str, str],
               budget: Budget, record: RecordBlock) -> tuple[str, str, tuple[float | None, float | None]]:
        """The Capacity Block the group runs on: one the gang holds already in this zone for this type and size
        (a create retried, a purchase whose answer was lost, an earlier run of the same gang name: found by the
        gang's and owner's tags), else the zone's offering bought now. Its reservation id and the journal's note.
        No offering in the zone is a `CapacityError` before anything is bought: the next zone is tried. A block the
        gang holds elsewhere (or one bought this run, or a purchase of unknown outcome) refuses a second purchase:
        a block is never refunded, so a failover must not buy another. `record` journals the block before the
        purchase and after its answer (and a held block found), so a crash in between still leaves it named.
        Also the block's start and end (epoch seconds, None when EC2 did not say)."""
        c = target.candidate
        held = _call(budget, lambda: self._ec2.describe_capacity_reservations(Filters=[
            {"Name": f"tag:{GANG_TAG}", "Values": [tag_map[GANG_TAG]]},
            {"Name": f"tag:{OWNER_TAG}", "Values": [tag_map[OWNER_TAG]]},
            {"Name": "reservation-type", "Values": ["capacity-block"]}]))
        usable = [r for r in held.get("CapacityReservations") or []
                  if str(r.get("State")) in ("payment-pending", "scheduled", "active")]
        for r in usable:
            if (r.get("AvailabilityZone"), r.get("InstanceType"), r.get("TotalInstanceCount")) == (
                    target.zone_name, c.instance_type, nodes):
                found = _held(r, None, None)
                record(found)
                return str(r["CapacityReservationId"]), _block_note(r, None), (found.start_at, found.end_at)
        bought = self._bought or next((str(r["CapacityReservationId"]) for r in usable), None)
        if bought is not None:
            raise RefusedRequest(f"Capacity Block {bought} was bought for this gang already (in another zone, or of "
                                 "another size) and cannot be cancelled; geosched buys at most one per gang: down "
                                 "the gang, then run `up --name` with its name in that block's zone",
                                 code="CapacityBlockBought")
        now = self._clock()
        offers = self._offerings(c.instance_type, nodes, block, now, budget)
        chosen = spec.choose_offering(offers, target.zone_name, c.instance_type, nodes,
                                      now + block.start_within_h * 3600.0)
        if chosen is None:
            later = spec.choose_offering(offers, target.zone_name, c.instance_type, nodes)
            # A block that starts later than the user allowed (EC2 sells most from 11:30 UTC on a later day) is not
            # bought: the line says when, and how to allow it (the group then waits at 0 nodes until the start).
            starts = (f"; the zone's earliest starts at {_utc(later.start)}, later than --capacity-block-starts-within "
                      "allows" if later is not None else "")
            raise CapacityError(f"no Capacity Block of {nodes} x {c.instance_type} for {block.hours} h starting "
                                f"within {block.start_within_h:g} h is offered in {target.zone_name}{starts} "
                                "(nothing was bought)", code="NoCapacityBlockOffering")
        log.info("buying Capacity Block %s: %d x %s in %s for %d h, $%.2f up front", chosen.offering_id, nodes,
                 c.instance_type, target.zone_name, block.hours, chosen.upfront_usd)
        # Journalled before the purchase: a crash after it still leaves the offering bought named in the store.
        record(Block(chosen.zone_name, chosen.instance_type, nodes, chosen.offering_id, None, chosen.start,
                     chosen.end, chosen.upfront_usd))
        try:
            got = _call(budget, lambda: self._ec2.purchase_capacity_block(
                CapacityBlockOfferingId=chosen.offering_id, InstancePlatform="Linux/UNIX",
                TagSpecifications=spec.tag_specs("capacity-reservation", tag_map))["CapacityReservation"],
                mutating=True)
        except StallError:
            # The purchase may have gone through: no other zone buys in this run (its tags find it later).
            self._bought = f"(offering {chosen.offering_id}, whose purchase's answer was lost)"
            raise
        self._bought = str(got["CapacityReservationId"])
        held_now = _held(got, chosen, chosen.upfront_usd)
        record(held_now)
        return self._bought, _block_note(got, chosen.upfront_usd), (held_now.start_at, held_now.end_at)

    def _offerings(self, instance_type: str, nodes: int, block: spec.CapacityBlock, now: float,
                   budget: Budget) -> list[spec.BlockOffering]:
        """DescribeCapacityBlockOfferings for the gang's type and size over the next 8 weeks (every zone at once)."""
        asked = spec.offerings_request(instance_type, nodes, block, now)
        answer = _call(budget, lambda: self._ec2.describe_capacity_block_offerings(**asked))
        return [spec.BlockOffering(str(o["CapacityBlockOfferingId"]), str(o["AvailabilityZone"]),
                                   str(o["InstanceType"]), int(o["InstanceCount"]),
                                   int(o["CapacityBlockDurationHours"]), o["StartDate"].timestamp(),
                                   o["EndDate"].timestamp(), float(o.get("UpfrontFee") or 0))
                for o in answer.get("CapacityBlockOfferings") or []]

    def quote(self, targets: Sequence[spec.Target], nodes: int, budget: Budget) -> list[spec.Quote]:
        """What `create` would buy in each target's zone, read and not bought (a dry run): one
        DescribeCapacityBlockOfferings per instance type; the zone's offering starting within the window (the same
        choice as `_block`), else its earliest later one, marked as refused."""
        block = self.capacity_block
        if block is None:
            return []
        now = self._clock()
        read: dict[str, list[spec.BlockOffering]] = {}
        out: list[spec.Quote] = []
        for t in targets:
            kind = t.candidate.instance_type
            if kind not in read:
                read[kind] = self._offerings(kind, nodes, block, now, budget)
            within = spec.choose_offering(read[kind], t.zone_name, kind, nodes, now + block.start_within_h * 3600.0)
            offer = within or spec.choose_offering(read[kind], t.zone_name, kind, nodes)
            out.append(spec.Quote(t, offer, within is not None, offer is not None and offer.start > now + LATER_THAN_S))
        return out

    def _make_parts(self, parts: spec.Parts, tag_map: Mapping[str, str], budget: Budget) -> tuple[str, int]:
        """The placement group, then the launch template naming it; each found instead when a retried create
        made it already. The template's (id, version)."""
        pg = spec.placement_group_request(parts, tag_map)
        _call(budget, lambda: _unless(PG_EXISTS, lambda: self._ec2.create_placement_group(**pg)), mutating=True)
        return self._make_template(spec.launch_template_request(parts, tag_map), parts, budget)

    def _make_template(self, lt: Mapping[str, Any], parts: spec.Parts, budget: Budget) -> tuple[str, int]:
        """The launch template (found instead when a retried create made it already): its (id, version)."""
        made = _call(budget, lambda: _unless(LT_EXISTS, lambda: self._ec2.create_launch_template(**lt)),
                     mutating=True)
        if made is None:
            made = _call(budget, lambda: self._ec2.describe_launch_templates(LaunchTemplateNames=[parts.name]))
            made = {"LaunchTemplate": made["LaunchTemplates"][0]}
        got = made["LaunchTemplate"]
        return str(got["LaunchTemplateId"]), int(got.get("LatestVersionNumber") or 1)

    def release(self, name: str, *, owner: str, instance_type: str, nodes: int, budget: Budget,
                capacity_type: str = "") -> list[str]:
        """The group's launch template, then its placement group (which EC2 refuses to delete while it holds
        instances: InUse, retried), each only if it exists. A Capacity Block the group ran on is not touched: EC2
        cannot cancel one (it ends at its end date)."""
        parts = spec.parts(instance_type, nodes, owner, name, capacity_type)
        if parts is None:
            return []
        out: list[str] = []
        # Looked up by name, then deleted by id: DescribeLaunchTemplates answers a name EC2 does not know with
        # InvalidLaunchTemplateName.NotFoundException (moto too; moto's DeleteLaunchTemplate answers it with
        # MissingParameter instead), and the template's tags say it is this store's.
        found = _call(budget, lambda: _unless(LT_GONE, lambda: self._ec2.describe_launch_templates(
            LaunchTemplateNames=[parts.name])))
        for template in (found or {}).get("LaunchTemplates") or []:
            tag_map = {t["Key"]: t["Value"] for t in template.get("Tags") or []}
            if tag_map.get(OWNER_TAG, owner) != owner:
                continue
            delete = partial(self._ec2.delete_launch_template, LaunchTemplateId=str(template["LaunchTemplateId"]))
            if _call(budget, partial(_unless, LT_GONE, delete), mutating=True) is not None:
                out.append(f"launch template {parts.name}")
        if capacity_type == spec.CAPACITY_BLOCK:
            out.extend(self._unschedule(owner, name, budget))
        if not parts.placement:
            return out
        gone = _call(budget, lambda: _unless({PG_GONE}, lambda: self._ec2.delete_placement_group(
            GroupName=parts.name), in_use=PG_IN_USE), mutating=True)
        if gone is not None:
            out.append(f"placement group {parts.name}")
        return out

    def _unschedule(self, owner: str, name: str, budget: Budget) -> list[str]:
        """The group's scheduled actions (`schedule`), by name, once the group is gone: AWS deletes them with the
        group's Auto Scaling group, so this finds none there; it deletes what a server keeping them apart from
        their group would leave (moto does). DescribeScheduledActions takes the names without the group's."""
        names = list(spec.action_names(owner, name))
        try:
            found = _call(budget, lambda: self._autoscaling.describe_scheduled_actions(ScheduledActionNames=names))
        except AuthError as error:
            # Without the right to look, nothing is left to fear on AWS (the actions went with the Auto Scaling
            # group), and a group on a block that started within the hour never had any: `down` goes on.
            log.info("scheduled actions of %s not looked for (%s): AWS deleted them with its Auto Scaling group",
                     name, error.message)
            return []
        out: list[str] = []
        for action in found.get("ScheduledUpdateGroupActions") or []:
            if action.get("ScheduledActionName") not in names:
                continue
            _call(budget, partial(self._autoscaling.delete_scheduled_action,
                                  AutoScalingGroupName=str(action["AutoScalingGroupName"]),
                                  ScheduledActionName=str(action["ScheduledActionName"])), mutating=True)
            out.append(f"scheduled action {action['ScheduledActionName']}")
        return out

    def describe(self, cluster: str, where: str, name: str, budget: Budget) -> Pool | None:
        """The group, or None once EKS no longer knows it."""
        try:
            return pool(_call(budget, lambda: self._eks.describe_nodegroup(clusterName=cluster,
                                                                           nodegroupName=name)["nodegroup"]))
        except _Missing:
            return None

    def delete(self, cluster: str, where: str, name: str, budget: Budget) -> bool:
        """Ask EKS to delete the group; False when it was already gone."""
        try:
            _call(budget, lambda: self._eks.delete_nodegroup(clusterName=cluster, nodegroupName=name), mutating=True)
        except _Missing:
            return False
        return True

    def names(self, cluster: str, where: str, budget: Budget) -> list[str]:
        out: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"clusterName": cluster, "maxResults": 100}
            if token:
                kwargs["nextToken"] = token
            try:
                page = _call(budget, partial(self._eks.list_nodegroups, **kwargs))
            except _Missing:
                return out
            out.extend(page.get("nodegroups") or [])
            token = page.get("nextToken")
            if not token:
                return out


# EKS's Nodegroup.status values onto the neutral states (EKS API reference, "Nodegroup"); any other (UPDATING,
# DEGRADED) is not a create in progress: `launch` treats it as the failure its health issues describe.
_STATUS = {spec.CREATING: backend.CREATING, spec.ACTIVE: backend.ACTIVE, spec.CREATE_FAILED: backend.FAILED,
           spec.DELETING: backend.DELETING, "DELETE_FAILED": backend.DELETE_FAILED}


def pool(group: Mapping[str, Any]) -> Pool:
    """A DescribeNodegroup / CreateNodegroup `nodegroup` as a `backend.Pool`. Pure."""
    status = str(group.get("status", ""))
    neutral = _STATUS.get(status, backend.OTHER)
    issues = (group.get("health") or {}).get("issues") or []
    name = str(group.get("nodegroupName", ""))
    # Any status but these two is a failure while a create is waited for (as before the backend interface).
    failure = None if neutral in (backend.CREATING, backend.ACTIVE) else spec.failure(status, issues, name)
    subnets = group.get("subnets") or [""]
    types = group.get("instanceTypes") or [""]
    return Pool(name, neutral, dict(group.get("tags") or {}), group.get("nodegroupArn"), str(subnets[0]),
                str(group.get("capacityType", "")), int((group.get("scalingConfig") or {}).get("desiredSize", 0)),
                failure, instance_type=str(types[0]))


def _held(reservation: Mapping[str, Any], offer: spec.BlockOffering | None, upfront_usd: float | None) -> Block:
    """A CapacityReservation (PurchaseCapacityBlock's answer, or one DescribeCapacityReservations found) for the
    journal; its dates, else the offering's."""
    start: Any = reservation.get("StartDate")
    end: Any = reservation.get("EndDate")
    return Block(str(reservation.get("AvailabilityZone") or (offer.zone_name if offer else "")),
                 str(reservation.get("InstanceType") or (offer.instance_type if offer else "")),
                 int(reservation.get("TotalInstanceCount") or (offer.count if offer else 0)),
                 offer.offering_id if offer else None, str(reservation["CapacityReservationId"]),
                 start.timestamp() if hasattr(start, "timestamp") else (offer.start if offer else None),
                 end.timestamp() if hasattr(end, "timestamp") else (offer.end if offer else None), upfront_usd)


def _utc(at: float) -> str:
    return f"{datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M} UTC"


def _unrecorded(block: Block) -> None:
    """No journal (a library caller that keeps none): the block's tags still find it."""


def _block_note(reservation: Mapping[str, Any], upfront_usd: float | None) -> str:
    """The journal's line for a group's Capacity Block: its id, size, zone, dates and fee."""
    start, end = reservation.get("StartDate"), reservation.get("EndDate")
    when = (f", {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC" if start is not None and end is not None
            and hasattr(start, "strftime") else "")
    fee = f", ${upfront_usd:,.2f} paid up front" if upfront_usd is not None else ""
    return (f"capacity block {reservation.get('CapacityReservationId')}: {reservation.get('TotalInstanceCount')} x "
            f"{reservation.get('InstanceType')} in {reservation.get('AvailabilityZone')}{when}{fee}; EC2 cannot "
            "cancel it: it stays reserved, and paid, until its end")


def _unless(codes: str | frozenset[str] | set[str], fn: Callable[[], T], *, in_use: str | None = None) -> T | None:
    """`fn`'s answer, or None when EC2 answers one of `codes` (a part already there, or already gone); `in_use`
    (a placement group still holding instances) is transient: retried in place by the caller's policy."""
    wanted = {codes} if isinstance(codes, str) else set(codes)
    try:
        return fn()
    except bex.ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in wanted:
            return None
        if in_use is not None and code == in_use:
            raise TransientError(str(exc.response.get("Error", {}).get("Message", "")), code=code) from None
        raise


class _Missing(Exception):
    """ResourceNotFoundException: the cluster or group does not exist (not an error for the callers)."""


def _call(budget: Budget, fn: Callable[[], T], *, mutating: bool = False) -> T:
    if budget.expired:
        raise StallError("deadline passed before the call", code="Deadline")
    budget.tick()
    try:
        return fn()
    except bex.ClientError as exc:
        err = exc.response.get("Error", {})
        code = str(err.get("Code", "Unknown"))
        message = str(err.get("Message", ""))
        if code == NOT_FOUND:
            raise _Missing(message) from None
        if code == IN_USE:
            raise InUse(message, code=code) from None
        if code in REQUEST_CODES:
            raise RefusedRequest(message, code=code) from None
        if code in EKS_CODES:
            raise EKS_CODES[code](message, code=code) from None
        raise aws.classify(exc, mutating=mutating, budget=budget) from None
    except bex.BotoCoreError as exc:
        raise aws.classify(exc, mutating=mutating, budget=budget) from None
