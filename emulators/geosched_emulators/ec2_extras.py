"""What moto (5.2) does not answer and the provider tests need, answered by the fault proxy in front of it:

- **Service Quotas** `GetServiceQuota` for EC2: moto knows only VPC quotas and answers every EC2 quota code
  with NoSuchResourceException. Configured quotas are answered here; the rest still go to moto.
- **Price List** `GetProducts` (AWSPriceListService, the on-demand price API; moto has no `pricing` service):
  products set with `set_ondemand_price` are answered in the documented aws_v1 shape (each PriceList entry a JSON
  string with `product.attributes` and `terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD`), filtered by
  TERM_MATCH on their attributes; nothing set, nothing listed.
- **Console output** `GetConsoleOutput`: moto answers a fixed boot log without cloud-init's host key block; for
  instances given host keys with `set_host_keys` the answer carries the block cloud-init prints
  (`-----BEGIN SSH HOST KEY KEYS-----` ... `-----END SSH HOST KEY KEYS-----`), base64 as EC2 sends it.
- **Placement groups**: moto implements neither CreatePlacementGroup nor DescribePlacementGroups, and drops
  `Placement.GroupName` from RunInstances. Here groups are created, described and deleted per region; a
  RunInstances naming an unknown group is refused as EC2 refuses it (InvalidPlacementGroup.Unknown); a known
  one is forwarded, and the group is filled into `placement.groupName` of the instances in RunInstances and
  DescribeInstances responses.
- **Spot placement scores** `GetSpotPlacementScores` (moto has no such action): scores set per zone ID with
  `set_placement_score` (optionally per instance type) are answered in the EC2 API reference's shape
  (docs.aws.amazon.com/AWSEC2/latest/APIReference/API_GetSpotPlacementScores.html: `spotPlacementScoreSet` of
  `item`s with `region`, `availabilityZoneId` (only with SingleAvailabilityZone=true) and `score` 1-10), for the
  regions asked (`RegionName.N`). A zone-level request lists each configured zone of those regions; a
  region-level one the best zone's score per region (a region score assumes every zone may be used). The score
  for several instance types is the best configured for any of them. Nothing configured, an empty set.
- **Spot price history** `DescribeSpotPriceHistory`: moto answers one placeholder price per zone stamped 2006.
  For a region given a history with `set_spot_price_history`, the answer is that history in the API reference's
  shape (API_DescribeSpotPriceHistory.html: `spotPriceHistorySet` of `item`s with `availabilityZone`,
  `instanceType`, `productDescription`, `spotPrice` as a string, `timestamp`), filtered by `InstanceType.N`,
  `ProductDescription.N` and `AvailabilityZone`, newest first: the records between StartTime and EndTime plus,
  as EC2 documents, the last change before StartTime (the price in force at the start).
- **Capacity Blocks for ML** (moto has no capacity reservations at all): offerings added with
  `add_capacity_block_offering` are answered by `DescribeCapacityBlockOfferings` (EC2 API reference,
  API_DescribeCapacityBlockOfferings.html: InstanceType, InstanceCount, CapacityDurationHours, StartDateRange,
  EndDateRange in; `capacityBlockOfferingSet` of `item`s with capacityBlockOfferingId, instanceType,
  availabilityZone, instanceCount, startDate, endDate, capacityBlockDurationHours, upfrontFee, currencyCode,
  tenancy out), matching the type, count and duration exactly and the start within the range. `PurchaseCapacityBlock`
  (API_PurchaseCapacityBlock.html: CapacityBlockOfferingId, InstancePlatform, TagSpecification.N) turns an
  offering into a capacity reservation (`capacityReservation`: capacityReservationId `cr-...`, instanceType,
  availabilityZone, totalInstanceCount, availableInstanceCount, state `scheduled` before its start and `active`
  from it, startDate, endDate, endDateType `limited`, instanceMatchCriteria `targeted`, reservationType
  `capacity-block`, tagSet), the offering gone; an unknown or already bought offering is refused
  (InvalidParameterValue). `DescribeCapacityReservations` (API_DescribeCapacityReservations.html:
  CapacityReservationId.N, Filter.N `tag:KEY`, `state`, `reservation-type`) lists them in the same shape. There is
  no way to cancel one: EC2 refuses CancelCapacityReservation for a Capacity Block ("Capacity Blocks can't be
  canceled", EC2 User Guide, "Capacity Blocks for ML"), and nothing here answers it.

Everything else passes through untouched.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ._http import HttpRequest, HttpResponse

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
_XML_HEADERS = [("Content-Type", "text/xml;charset=UTF-8"), ("Server", "AmazonEC2")]
_PLACEMENT_ACTIONS = frozenset({"CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup"})
_BLOCK_ACTIONS = frozenset({"DescribeCapacityBlockOfferings", "PurchaseCapacityBlock", "DescribeCapacityReservations"})
# SigV4's credential scope names the region the client signed for: AKID/date/REGION/service/aws4_request.
_SCOPE_RE = re.compile(r"Credential=[^/]+/\d+/([^/]+)/")


def request_region(req: HttpRequest) -> str:
    scope = _SCOPE_RE.search(req.headers.get("authorization", ""))
    return scope.group(1) if scope else "us-east-1"


class Ec2Extras:
    """Service quotas and placement groups, in memory, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (service code, quota code, region or None for every region) -> value
        self._quotas: dict[tuple[str, str, str | None], float] = {}
        # (region, group name) -> strategy
        self._groups: dict[tuple[str, str], str] = {}
        self._instance_group: dict[str, str] = {}
        # (instance type, region code) -> USD per hour, on-demand Linux shared tenancy
        self._ondemand: dict[tuple[str, str], float] = {}
        # instance id -> public host key lines its console shows
        self._host_keys: dict[str, tuple[str, ...]] = {}
        # (region, zone id, instance type or None for every type) -> Spot placement score 1-10
        self._scores: dict[tuple[str, str, str | None], int] = {}
        # region -> (AZ name, instance type, timestamp, USD per hour) records, Linux/UNIX
        self._spot_history: dict[str, list[tuple[str, str, float, float]]] = {}
        # offering id -> (region, offering); reservation id -> (region, reservation)
        self._offerings: dict[str, tuple[str, dict[str, Any]]] = {}
        self._reservations: dict[str, tuple[str, dict[str, Any]]] = {}

    # -- control -----------------------------------------------------------

    def set_service_quota(self, service_code: str, quota_code: str, value: float | None, region: str | None) -> None:
        with self._lock:
            if value is None:
                self._quotas.pop((service_code, quota_code, region), None)
            else:
                self._quotas[(service_code, quota_code, region)] = float(value)

    def set_ondemand_price(self, instance_type: str, region: str, usd_per_hour: float | None) -> None:
        with self._lock:
            if usd_per_hour is None:
                self._ondemand.pop((instance_type, region), None)
            else:
                self._ondemand[(instance_type, region)] = float(usd_per_hour)

    def set_host_keys(self, instance_id: str, keys: tuple[str, ...]) -> None:
        with self._lock:
            self._host_keys[instance_id] = tuple(keys)

    def set_spot_price_history(self, region: str, records: list[tuple[str, str, float, float]] | None) -> None:
        with self._lock:
            if records is None:
                self._spot_history.pop(region, None)
            else:
                self._spot_history[region] = list(records)

    def set_placement_score(self, region: str, zone_id: str, score: int | None,
                            instance_type: str | None = None) -> None:
        with self._lock:
            if score is None:
                self._scores.pop((region, zone_id, instance_type), None)
            else:
                if not 1 <= int(score) <= 10:
                    raise ValueError(f"a Spot placement score is 1-10, got {score}")
                self._scores[(region, zone_id, instance_type)] = int(score)

    def add_capacity_block_offering(self, region: str, zone: str, instance_type: str, count: int, hours: int,
                                    upfront_fee: float, *, start: float | None = None) -> str:
        """Offer a Capacity Block of `count` x `instance_type` for `hours` in AZ `zone` (its name), starting at
        `start` (epoch seconds; default five minutes from now, as a block asked for now starts shortly after);
        its offering id."""
        begin = time.time() + 300.0 if start is None else start
        offering_id = f"cb-{uuid.uuid4().hex[:17]}"
        with self._lock:
            self._offerings[offering_id] = (region, {
                "capacityBlockOfferingId": offering_id, "instanceType": instance_type, "availabilityZone": zone,
                "instanceCount": int(count), "start": begin, "end": begin + hours * 3600.0,
                "capacityBlockDurationHours": int(hours), "upfrontFee": f"{upfront_fee:.2f}",
                "currencyCode": "USD", "tenancy": "default"})
        return offering_id

    def capacity_reservations(self, region: str) -> dict[str, dict[str, Any]]:
        """The Capacity Blocks bought in `region`, by reservation id (copies)."""
        with self._lock:
            return {rid: dict(r) for rid, (reg, r) in self._reservations.items() if reg == region}

    def placement_groups(self, region: str) -> dict[str, str]:
        with self._lock:
            return {name: strategy for (r, name), strategy in self._groups.items() if r == region}

    def reset(self) -> None:
        with self._lock:
            self._quotas.clear()
            self._groups.clear()
            self._instance_group.clear()
            self._ondemand.clear()
            self._host_keys.clear()
            self._scores.clear()
            self._spot_history.clear()
            self._offerings.clear()
            self._reservations.clear()

    # -- requests ------------------------------------------------------------

    def answer(self, action: str, params: Mapping[str, str], req: HttpRequest) -> HttpResponse | None:
        """A response for what moto cannot answer; None to forward the request."""
        if action == "GetServiceQuota":
            return self._service_quota(req)
        if action == "GetProducts":
            return self._products(req)
        if action == "GetConsoleOutput":
            return self._console(params.get("InstanceId", ""))
        if action == "GetSpotPlacementScores":
            return self._placement_scores(params)
        if action == "DescribeSpotPriceHistory":
            return self._spot_prices(params, request_region(req))
        if action in _PLACEMENT_ACTIONS:
            return self._placement(action, params, request_region(req))
        if action in _BLOCK_ACTIONS:
            return self._capacity_blocks(action, params, request_region(req))
        if action == "RunInstances" and params.get("Placement.GroupName"):
            name = params["Placement.GroupName"]
            with self._lock:
                known = (request_region(req), name) in self._groups
            if not known:
                return _error(400, "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
        return None

    def rewrite(self, action: str, params: Mapping[str, str], response: HttpResponse) -> HttpResponse:
        """Fill placement.groupName into instance descriptions (moto leaves it empty)."""
        if response.status != 200 or action not in ("RunInstances", "DescribeInstances"):
            return response
        group = params.get("Placement.GroupName") if action == "RunInstances" else None
        with self._lock:
            if not group and not self._instance_group:
                return response
        try:
            root = ET.fromstring(response.body)
        except ET.ParseError:
            return response
        # moto's namespace has no trailing slash, EC2's has one: match on local names, keep moto's namespace.
        ns = root.tag[1:].split("}", 1)[0] if root.tag.startswith("{") else ""
        changed = False
        with self._lock:
            for item in root.iter():
                if _local(item.tag) != "item":
                    continue
                instance_id = _child(item, "instanceId")
                placement = _child(item, "placement")
                if instance_id is None or not instance_id.text or placement is None:
                    continue
                if group:
                    self._instance_group[instance_id.text] = group
                name = self._instance_group.get(instance_id.text)
                if name is None:
                    continue
                elem = _child(placement, "groupName")
                if elem is None:
                    elem = ET.SubElement(placement, f"{{{ns}}}groupName" if ns else "groupName")
                elem.text = name
                changed = True
        if not changed:
            return response
        if ns:
            ET.register_namespace("", ns)
        body = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root)
        return HttpResponse(response.status, body, [(k, v) for k, v in response.headers
                                                    if k.lower() != "content-length"])

    def _service_quota(self, req: HttpRequest) -> HttpResponse | None:
        try:
            data = json.loads(req.body or b"{}")
        except ValueError:
            return None
        service, code = str(data.get("ServiceCode", "")), str(data.get("QuotaCode", ""))
        region = request_region(req)
        with self._lock:
            value = self._quotas.get((service, code, region), self._quotas.get((service, code, None)))
        if value is None:
            return None
        body = {"Quota": {
            "ServiceCode": service, "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)", "QuotaCode": code,
            "QuotaArn": f"arn:aws:servicequotas:{region}:123456789012:{service}/{code}", "QuotaName": code,
            "Value": value, "Unit": "None", "Adjustable": True, "GlobalQuota": False,
        }}
        headers = [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", str(uuid.uuid4()))]
        return HttpResponse(200, json.dumps(body).encode(), headers)

    def _console(self, instance_id: str) -> HttpResponse | None:
        with self._lock:
            keys = self._host_keys.get(instance_id)
        if keys is None:
            return None
        text = ("Cloud-init v. 24.1 running 'modules:final'\n-----BEGIN SSH HOST KEY KEYS-----\n"
                + "".join(f"{k} root@{instance_id}\n" for k in keys) + "-----END SSH HOST KEY KEYS-----\n")
        return _ok("GetConsoleOutput", [("instanceId", instance_id), ("timestamp", "2026-12-03T00:00:00.000Z"),
                                        ("output", base64.b64encode(text.encode()).decode())])

    def _spot_prices(self, params: Mapping[str, str], region: str) -> HttpResponse | None:
        with self._lock:
            records = self._spot_history.get(region)
        if records is None:
            return None
        types = {v for k, v in params.items() if re.fullmatch(r"InstanceType\.\d+", k)}
        products = {v for k, v in params.items() if re.fullmatch(r"ProductDescription\.\d+", k)}
        zone = params.get("AvailabilityZone")
        start, end = _when(params.get("StartTime"), float("-inf")), _when(params.get("EndTime"), float("inf"))
        chosen: list[tuple[str, str, float, float]] = []
        series: dict[tuple[str, str], list[tuple[str, str, float, float]]] = {}
        for r in records:
            if (not types or r[1] in types) and (not products or "Linux/UNIX" in products) and zone in (None, r[0]):
                series.setdefault((r[0], r[1]), []).append(r)
        for points in series.values():
            points.sort(key=lambda r: r[2])
            before = [r for r in points if r[2] <= start]
            chosen += before[-1:] + [r for r in points if start < r[2] <= end]
        root = _response_root("DescribeSpotPriceHistory")
        items = ET.SubElement(root, "spotPriceHistorySet")
        for az, instance_type, at, price in sorted(chosen, key=lambda r: -r[2]):
            item = ET.SubElement(items, "item")
            ET.SubElement(item, "instanceType").text = instance_type
            ET.SubElement(item, "productDescription").text = "Linux/UNIX"
            ET.SubElement(item, "spotPrice").text = f"{price:.6f}"
            ET.SubElement(item, "timestamp").text = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at))
            ET.SubElement(item, "availabilityZone").text = az
        ET.SubElement(root, "nextToken").text = ""
        return HttpResponse(200, b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root), list(_XML_HEADERS))

    def _placement_scores(self, params: Mapping[str, str]) -> HttpResponse:
        regions = sorted({v for k, v in params.items() if re.fullmatch(r"RegionName\.\d+", k)})
        types = {v for k, v in params.items() if re.fullmatch(r"InstanceType\.\d+", k)}
        single = params.get("SingleAvailabilityZone", "false").lower() == "true"
        zones: dict[tuple[str, str], int] = {}
        with self._lock:
            for (region, zone, instance_type), score in self._scores.items():
                if (regions and region not in regions) or (instance_type is not None and instance_type not in types):
                    continue
                zones[(region, zone)] = max(score, zones.get((region, zone), 0))
        root = _response_root("GetSpotPlacementScores")
        items = ET.SubElement(root, "spotPlacementScoreSet")
        if single:
            rows: list[tuple[str, str | None, int]] = [(r, z, s) for (r, z), s in sorted(zones.items())]
        else:
            best: dict[str, int] = {}
            for (r, _), s in zones.items():
                best[r] = max(s, best.get(r, 0))
            rows = [(r, None, s) for r, s in sorted(best.items())]
        # The API answers the top 10 by score, best first.
        for region, zone_id, score in sorted(rows, key=lambda row: -row[2])[:10]:
            item = ET.SubElement(items, "item")
            ET.SubElement(item, "region").text = region
            if zone_id is not None:
                ET.SubElement(item, "availabilityZoneId").text = zone_id
            ET.SubElement(item, "score").text = str(score)
        return HttpResponse(200, b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root), list(_XML_HEADERS))

    def _products(self, req: HttpRequest) -> HttpResponse:
        try:
            data = json.loads(req.body or b"{}")
        except ValueError:
            return _json_error(400, "InvalidParameterException", "unreadable request")
        wanted = {str(f.get("Field")): str(f.get("Value")) for f in data.get("Filters", []) or []
                  if f.get("Type") == "TERM_MATCH"}
        with self._lock:
            prices = sorted(self._ondemand.items())
        items = [_price_list_item(t, r, usd) for (t, r), usd in prices]
        matching = [json.dumps(i) for i in items
                    if data.get("ServiceCode") == "AmazonEC2"
                    and all(i["product"]["attributes"].get(k) == v for k, v in wanted.items())]
        body = {"FormatVersion": "aws_v1", "PriceList": matching}
        headers = [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", str(uuid.uuid4()))]
        return HttpResponse(200, json.dumps(body).encode(), headers)

    def _placement(self, action: str, params: Mapping[str, str], region: str) -> HttpResponse:
        name = params.get("GroupName", "")
        with self._lock:
            if action == "CreatePlacementGroup":
                if (region, name) in self._groups:
                    return _error(400, "InvalidPlacementGroup.Duplicate",
                                  f"The Placement Group '{name}' already exists.")
                self._groups[(region, name)] = params.get("Strategy", "cluster")
                return _ok(action, [("return", "true")])
            if action == "DeletePlacementGroup":
                if self._groups.pop((region, name), None) is None:
                    return _error(400, "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
                return _ok(action, [("return", "true")])
            wanted = {v for k, v in params.items() if re.fullmatch(r"GroupName\.\d+", k)}
            groups = sorted((n, s) for (r, n), s in self._groups.items() if r == region and (not wanted or n in wanted))
        root = _response_root(action)
        items = ET.SubElement(root, "placementGroupSet")
        for group_name, strategy in groups:
            item = ET.SubElement(items, "item")
            ET.SubElement(item, "groupName").text = group_name
            ET.SubElement(item, "strategy").text = strategy
            ET.SubElement(item, "state").text = "available"
            ET.SubElement(item, "groupId").text = f"pg-{uuid.uuid5(uuid.NAMESPACE_DNS, region + group_name).hex[:17]}"
        return HttpResponse(200, b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root), list(_XML_HEADERS))


    def _capacity_blocks(self, action: str, params: Mapping[str, str], region: str) -> HttpResponse:
        now = time.time()
        if action == "DescribeCapacityBlockOfferings":
            hours = params.get("CapacityDurationHours")
            if not hours:
                return _error(400, "MissingParameter", "The request must contain the parameter CapacityDurationHours")
            earliest, latest = _when(params.get("StartDateRange"), float("-inf")), _when(params.get("EndDateRange"),
                                                                                         float("inf"))
            with self._lock:
                found = [dict(o) for reg, o in self._offerings.values() if reg == region
                         and o["capacityBlockDurationHours"] == int(hours)
                         and params.get("InstanceType") in (None, o["instanceType"])
                         and params.get("InstanceCount") in (None, str(o["instanceCount"]))
                         and o["start"] >= earliest and o["end"] <= latest]
            root = _response_root(action)
            items = ET.SubElement(root, "capacityBlockOfferingSet")
            for o in sorted(found, key=lambda o: (o["start"], o["capacityBlockOfferingId"])):
                item = ET.SubElement(items, "item")
                for key in ("capacityBlockOfferingId", "instanceType", "availabilityZone"):
                    ET.SubElement(item, key).text = o[key]
                ET.SubElement(item, "instanceCount").text = str(o["instanceCount"])
                ET.SubElement(item, "startDate").text = _iso(o["start"])
                ET.SubElement(item, "endDate").text = _iso(o["end"])
                for key in ("capacityBlockDurationHours", "upfrontFee", "currencyCode", "tenancy"):
                    ET.SubElement(item, key).text = str(o[key])
            return _xml(root)
        if action == "PurchaseCapacityBlock":
            offering_id = params.get("CapacityBlockOfferingId", "")
            tags = _tags(params, "capacity-reservation")
            with self._lock:
                held = self._offerings.pop(offering_id, None)
                if held is None or held[0] != region:
                    if held is not None:
                        self._offerings[offering_id] = held
                    return _error(400, "InvalidParameterValue",
                                  f"The Capacity Block offering '{offering_id}' is not available.")
                o = held[1]
                rid = f"cr-{uuid.uuid4().hex[:17]}"
                reservation = {
                    "capacityReservationId": rid,
                    "capacityReservationArn": f"arn:aws:ec2:{region}:123456789012:capacity-reservation/{rid}",
                    "ownerId": "123456789012", "instanceType": o["instanceType"],
                    "instancePlatform": params.get("InstancePlatform", "Linux/UNIX"),
                    "availabilityZone": o["availabilityZone"], "tenancy": "default",
                    "totalInstanceCount": o["instanceCount"], "availableInstanceCount": o["instanceCount"],
                    "start": o["start"], "end": o["end"], "create": now, "endDateType": "limited",
                    "instanceMatchCriteria": "targeted", "reservationType": "capacity-block",
                    "upfrontFee": o["upfrontFee"], "tags": tags}
                self._reservations[rid] = (region, reservation)
            root = _response_root(action)
            _reservation_xml(ET.SubElement(root, "capacityReservation"), reservation, now)
            return _xml(root)
        wanted = {v for k, v in params.items() if re.fullmatch(r"CapacityReservationId\.\d+", k)}
        filters = _filters(params)
        with self._lock:
            found = [dict(r) for rid, (reg, r) in self._reservations.items()
                     if reg == region and (not wanted or rid in wanted)]
        if wanted - {r["capacityReservationId"] for r in found}:
            missing = sorted(wanted - {r["capacityReservationId"] for r in found})[0]
            return _error(400, "InvalidCapacityReservationId.NotFound",
                          f"The capacity reservation ID '{missing}' does not exist")
        root = _response_root(action)
        items = ET.SubElement(root, "capacityReservationSet")
        for r in sorted(found, key=lambda r: r["capacityReservationId"]):
            state = "active" if r["start"] <= now < r["end"] else ("scheduled" if now < r["start"] else "expired")
            fields = {**{f"tag:{k}": v for k, v in r["tags"].items()}, "state": state,
                      "reservation-type": r["reservationType"], "instance-type": r["instanceType"]}
            if all(fields.get(name) in values for name, values in filters.items()):
                _reservation_xml(ET.SubElement(items, "item"), r, now)
        return _xml(root)


def _reservation_xml(elem: ET.Element, r: Mapping[str, Any], now: float) -> None:
    state = "active" if r["start"] <= now < r["end"] else ("scheduled" if now < r["start"] else "expired")
    for key in ("capacityReservationId", "capacityReservationArn", "ownerId", "instanceType", "instancePlatform",
                "availabilityZone", "tenancy", "endDateType", "instanceMatchCriteria", "reservationType"):
        ET.SubElement(elem, key).text = str(r[key])
    ET.SubElement(elem, "totalInstanceCount").text = str(r["totalInstanceCount"])
    ET.SubElement(elem, "availableInstanceCount").text = str(r["availableInstanceCount"])
    ET.SubElement(elem, "state").text = state
    ET.SubElement(elem, "startDate").text = _iso(r["start"])
    ET.SubElement(elem, "endDate").text = _iso(r["end"])
    ET.SubElement(elem, "createDate").text = _iso(r["create"])
    tag_set = ET.SubElement(elem, "tagSet")
    for key, value in r["tags"].items():
        item = ET.SubElement(tag_set, "item")
        ET.SubElement(item, "key").text = key
        ET.SubElement(item, "value").text = value


def _tags(params: Mapping[str, str], resource: str) -> dict[str, str]:
    """The tags of TagSpecification.N whose ResourceType is `resource`, as the query protocol sends them."""
    out: dict[str, str] = {}
    for key, value in params.items():
        m = re.fullmatch(r"TagSpecification\.(\d+)\.ResourceType", key)
        if m is None or value != resource:
            continue
        n = m.group(1)
        for tag_key, tag_value in params.items():
            t = re.fullmatch(rf"TagSpecification\.{n}\.Tag\.(\d+)\.Key", tag_key)
            if t is not None:
                out[tag_value] = params.get(f"TagSpecification.{n}.Tag.{t.group(1)}.Value", "")
    return out


def _filters(params: Mapping[str, str]) -> dict[str, set[str]]:
    """Filter.N.Name / Filter.N.Value.M as {name: values}."""
    out: dict[str, set[str]] = {}
    for key, name in params.items():
        m = re.fullmatch(r"Filter\.(\d+)\.Name", key)
        if m is not None:
            out[name] = {v for k, v in params.items() if re.fullmatch(rf"Filter\.{m.group(1)}\.Value\.\d+", k)}
    return out


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at))


def _xml(root: ET.Element) -> HttpResponse:
    return HttpResponse(200, b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root), list(_XML_HEADERS))


def _when(text: str | None, default: float) -> float:
    """An ISO 8601 request timestamp as botocore sends it, as epoch seconds."""
    if not text:
        return default
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(elem: ET.Element, name: str) -> ET.Element | None:
    return next((c for c in elem if _local(c.tag) == name), None)


def _response_root(action: str) -> ET.Element:
    root = ET.Element(f"{action}Response", {"xmlns": EC2_NS})
    ET.SubElement(root, "requestId").text = str(uuid.uuid4())
    return root


def _ok(action: str, fields: list[tuple[str, str]]) -> HttpResponse:
    root = _response_root(action)
    for key, value in fields:
        ET.SubElement(root, key).text = value
    return HttpResponse(200, b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root), list(_XML_HEADERS))


def _error(status: int, code: str, message: str) -> HttpResponse:
    root = ET.Element("Response")
    err = ET.SubElement(ET.SubElement(root, "Errors"), "Error")
    ET.SubElement(err, "Code").text = code
    ET.SubElement(err, "Message").text = message
    ET.SubElement(root, "RequestID").text = str(uuid.uuid4())
    return HttpResponse(status, b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root), list(_XML_HEADERS))


def _price_list_item(instance_type: str, region: str, usd_per_hour: float) -> dict[str, Any]:
    """One product of the EC2 price list as GetProducts returns it (aws_v1; the Billing User Guide, "Reading the
    service price list file": product attributes, OnDemand term with its price dimensions)."""
    sku = uuid.uuid5(uuid.NAMESPACE_URL, f"{instance_type}/{region}").hex[:16].upper()
    term, rate = f"{sku}.JRTCKXETXF", f"{sku}.JRTCKXETXF.6YS6EN2CT7"
    return {
        "product": {"productFamily": "Compute Instance", "sku": sku, "attributes": {
            "servicecode": "AmazonEC2", "instanceType": instance_type, "regionCode": region,
            "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
            "licenseModel": "No License required", "usagetype": f"BoxUsage:{instance_type}"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {term: {
            "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "termAttributes": {},
            "priceDimensions": {rate: {
                "rateCode": rate, "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                "description": f"${usd_per_hour:.4f} per On Demand Linux {instance_type} Instance Hour",
                "pricePerUnit": {"USD": f"{usd_per_hour:.10f}"}}}}}},
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
    }


def _json_error(status: int, code: str, message: str) -> HttpResponse:
    body = json.dumps({"__type": code, "message": message}).encode()
    return HttpResponse(status, body, [("Content-Type", "application/x-amz-json-1.1")])
