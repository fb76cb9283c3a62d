"""Fault-injecting HTTP proxy for the EC2 Query API, meant to sit in front of
moto's server so that unmodified boto3 clients see real AWS error responses
per Availability Zone and per Action.

Usage::

    with MotoServer() as moto, Ec2FaultProxy(moto.url) as proxy:
        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=proxy.url, ...)
        proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone="us-east-1a", action="RunInstances")
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urlsplit

from ._http import (
    ADMIN_PREFIX,
    LOOPBACK,
    CallRecord,
    Emulator,
    FaultRule,
    HttpRequest,
    HttpResponse,
    Times,
    json_response,
)
from .ec2_extras import Ec2Extras
from .eks_extras import NodegroupOverrides

# Not forwarded: they describe the client<->proxy hop, not the request.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)

_XML_HEADERS = [("Content-Type", "text/xml;charset=UTF-8"), ("Server", "AmazonEC2")]
# Paths of the REST-JSON APIs the proxy forwards (EKS: /clusters/...), whose injected errors are JSON.
_REST_JSON_PATH = re.compile(r"^/clusters(/|$)")
_EC2_API_VERSION = "2016-11-15"


# --------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Ec2Fault:
    """A fault to inject; build with the classmethods.

    Messages may use ``{zone}``, ``{region}``, ``{instance_type}``,
    ``{other_zones}`` and ``{action}``; they are filled from the request.
    HTTP statuses are the ones EC2 uses (capacity/internal errors are 5xx
    "server" errors there, which matters: botocore retries 5xx and
    RequestLimitExceeded before raising).
    """

    kind: Literal["error", "stall", "lost"]
    code: str = ""
    message: str = ""
    http_status: int = 0
    seconds: float = 0.0

    @classmethod
    def error(cls, code: str, message: str, http_status: int = 400) -> Ec2Fault:
        return cls("error", code, message, http_status)

    @classmethod
    def insufficient_instance_capacity(cls) -> Ec2Fault:
        return cls.error(
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient {instance_type} capacity in the Availability Zone you "
            "requested ({zone}). Our system will be working on provisioning additional capacity. You can "
            "currently get {instance_type} capacity by not specifying an Availability Zone in your request "
            "or choosing {other_zones}.",
            500,
        )

    @classmethod
    def instance_limit_exceeded(cls, limit: int = 0) -> Ec2Fault:
        return cls.error(
            "InstanceLimitExceeded",
            f"You have requested more instances than your current instance limit of {limit} allows for the "
            "specified instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to request "
            "an adjustment to this limit.",
        )

    @classmethod
    def vcpu_limit_exceeded(cls, limit: int = 0) -> Ec2Fault:
        return cls.error(
            "VcpuLimitExceeded",
            f"You have requested more vCPU capacity than your current vCPU limit of {limit} allows for the "
            "instance bucket that the specified instance type belongs to. Please visit "
            "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.",
        )

    @classmethod
    def max_spot_instance_count_exceeded(cls) -> Ec2Fault:
        return cls.error("MaxSpotInstanceCountExceeded", "Max spot instance count exceeded")

    @classmethod
    def unsupported(cls) -> Ec2Fault:
        return cls.error(
            "Unsupported",
            "Your requested instance type ({instance_type}) is not supported in your requested Availability "
            "Zone ({zone}). Please retry your request by not specifying an Availability Zone or choosing "
            "{other_zones}.",
        )

    @classmethod
    def request_limit_exceeded(cls) -> Ec2Fault:
        return cls.error("RequestLimitExceeded", "Request limit exceeded.", 503)

    @classmethod
    def internal_error(cls) -> Ec2Fault:
        return cls.error("InternalError", "An internal error has occurred", 500)

    @classmethod
    def auth_failure(cls) -> Ec2Fault:
        return cls.error("AuthFailure", "AWS was not able to validate the provided access credentials", 401)

    @classmethod
    def unauthorized_operation(cls) -> Ec2Fault:
        return cls.error(
            "UnauthorizedOperation",
            "You are not authorized to perform this operation. User: arn:aws:iam::123456789012:user/geosched "
            "is not authorized to perform: ec2:{action} because no identity-based policy allows the "
            "ec2:{action} action. Encoded authorization failure message: emulated",
            403,
        )

    @classmethod
    def lost(cls, code: str, message: str, http_status: int = 500) -> Ec2Fault:
        """Forward the request to moto, which acts on it, then answer this error instead of moto's answer: a
        server that accepted a create and answered a 5xx or a throttle anyway, so the client retries a request
        that already took effect (EKS API reference, "Common Errors": ServerException, "These errors are usually
        caused by a server-side issue"; the SDKs retry it)."""
        return cls("lost", code, message, http_status)

    @classmethod
    def stall(cls, seconds: float) -> Ec2Fault:
        """Hold the request, then forward it to moto as usual."""
        return cls("stall", seconds=seconds)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ec2Fault:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def error_xml(code: str, message: str, request_id: str | None = None) -> bytes:
    """EC2's Query-API error document."""
    root = ET.Element("Response")
    err = ET.SubElement(ET.SubElement(root, "Errors"), "Error")
    ET.SubElement(err, "Code").text = code
    ET.SubElement(err, "Message").text = message
    ET.SubElement(root, "RequestID").text = request_id or str(uuid.uuid4())
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root)


class _SafeFormat(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _region_of(zone: str) -> str:
    # us-east-1a -> us-east-1; local zones (us-west-2-lax-1a) are out of scope.
    return zone[:-1] if zone and zone[-1].isalpha() else zone


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child_text(elem: ET.Element, name: str) -> str | None:
    for child in elem:
        if _local(child.tag) == name:
            return child.text
    return None


def _find_path(elem: ET.Element, *names: str) -> str | None:
    cur: ET.Element | None = elem
    for name in names:
        if cur is None:
            return None
        cur = next((c for c in cur if _local(c.tag) == name), None)
    return cur.text if cur is not None else None


# --------------------------------------------------------------------------
# moto
# --------------------------------------------------------------------------


class MotoServer:
    """moto's ThreadedMotoServer on 127.0.0.1:<ephemeral>, as a context manager.

    moto keeps its state in process-global backends, so two MotoServers in
    one process share state; use reset() between tests."""

    def __init__(self) -> None:
        # Here, not at the top: moto takes seconds to import, and the GCE double alone never needs it.
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address=LOOPBACK, port=0, verbose=False)
        self._started = False

    def start(self) -> MotoServer:
        # werkzeug logs every request at INFO to stderr; that drowns test output.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server.start()
        self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self._server.stop()
            inner = getattr(self._server, "_server", None)
            if inner is not None:
                inner.server_close()
            self._started = False

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.get_host_and_port()
        return f"http://{host}:{port}"

    def reset(self) -> None:
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname or LOOPBACK, parts.port, timeout=30)
        try:
            conn.request("POST", "/moto-api/reset")
            conn.getresponse().read()
        finally:
            conn.close()


# --------------------------------------------------------------------------
# Proxy
# --------------------------------------------------------------------------


class Ec2FaultProxy(Emulator[Ec2Fault]):
    """Loopback HTTP proxy that injects EC2 faults and forwards the rest.

    The zone of a request is taken from any parameter ending in
    ``AvailabilityZone`` (``Placement.AvailabilityZone``,
    ``LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone``, ...), else from
    any ``...SubnetId`` or ``InstanceId.N`` mapped to its AZ. Those maps are
    learnt from moto's responses and, for ids not seen yet, looked up in moto
    (only while a zone-scoped fault is armed).
    """

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        if parts.hostname not in (LOOPBACK, "localhost"):
            raise ValueError("the proxy only forwards to a loopback upstream")
        self._upstream_host = parts.hostname or LOOPBACK
        self._upstream_port = parts.port or 80
        super().__init__()
        self._map_lock = threading.Lock()
        self._subnet_az: dict[str, str] = {}
        self._instance_az: dict[str, str] = {}
        # Service quotas and placement groups, which moto does not answer (see ec2_extras.py).
        self.extras = Ec2Extras()
        # EKS node group states moto never reaches (see eks_extras.py).
        self.nodegroups = NodegroupOverrides(self._zone_of_subnet)

    # -- control -----------------------------------------------------------

    def inject(
        self, fault: Ec2Fault, *, zone: str | None = None, action: str | None = None, times: Times = 1
    ) -> FaultRule[Ec2Fault]:
        """Fire `fault` on the next `times` matching requests (or "always").

        `action` is the EC2 Action (e.g. "RunInstances"); `zone` an AZ name.
        A zone-scoped fault never fires on a request with no resolvable AZ."""
        return self.faults.add(fault, zone=zone, method=action, times=times)

    def set_host_keys(self, instance_id: str, keys: tuple[str, ...]) -> None:
        """GetConsoleOutput for this instance shows these public host keys in cloud-init's block."""
        self.extras.set_host_keys(instance_id, keys)

    def set_ondemand_price(self, instance_type: str, region: str, usd_per_hour: float | None) -> None:
        """Answer the Price List API (GetProducts) with this on-demand Linux price; None forgets it."""
        self.extras.set_ondemand_price(instance_type, region, usd_per_hour)

    def set_spot_price_history(self, region: str, records: list[tuple[str, str, float, float]] | None) -> None:
        """Answer DescribeSpotPriceHistory in `region` from these (AZ name, instance type, epoch seconds, USD/h)
        records (Linux/UNIX) instead of moto's placeholder; None gives the region back to moto."""
        self.extras.set_spot_price_history(region, records)

    def set_placement_score(self, region: str, zone_id: str, score: int | None, *,
                            instance_type: str | None = None) -> None:
        """Answer GetSpotPlacementScores with `score` (1-10) for zone ID `zone_id` of `region` (for
        `instance_type` only, or any type); None forgets it."""
        self.extras.set_placement_score(region, zone_id, score, instance_type)

    def add_capacity_block_offering(self, region: str, zone: str, instance_type: str, count: int, hours: int,
                                    upfront_fee: float, *, start: float | None = None) -> str:
        """Offer a Capacity Block (DescribeCapacityBlockOfferings, PurchaseCapacityBlock: ec2_extras.py) of `count`
        x `instance_type` for `hours` in AZ name `zone`, from `start` (epoch seconds, default in five minutes)."""
        return self.extras.add_capacity_block_offering(region, zone, instance_type, count, hours, upfront_fee,
                                                       start=start)

    def capacity_reservations(self, region: str) -> dict[str, dict[str, Any]]:
        """The Capacity Blocks bought in `region`, by reservation id."""
        return self.extras.capacity_reservations(region)

    def set_service_quota(
        self, quota_code: str, value: float | None, *, region: str | None = None, service_code: str = "ec2"
    ) -> None:
        """Answer Service Quotas GetServiceQuota for `quota_code` (e.g. L-417A185B, running on-demand P
        vCPUs) with `value`, in `region` or every region; None forgets it (moto then answers
        NoSuchResourceException, as it does for every non-VPC quota)."""
        self.extras.set_service_quota(service_code, quota_code, value, region)

    def _zone_of_subnet(self, subnet: str) -> str | None:
        with self._map_lock:
            return self._subnet_az.get(subnet)

    def placement_groups(self, region: str) -> dict[str, str]:
        """Placement groups created through the proxy in `region`: name -> strategy."""
        return self.extras.placement_groups(region)

    # -- request handling ------------------------------------------------

    def _app(self, req: HttpRequest) -> HttpResponse:
        if req.path.startswith(ADMIN_PREFIX + "/"):
            return self._admin(req)
        params = self._params(req)
        action = params.get("Action") or _target_action(req.headers) or f"{req.method} {req.path}"
        zones = self._zones(params, req)
        zone = zones[0] if zones else None

        injected = False
        stall = self._take(zones, action, "stall")
        if stall is not None:
            injected = True
            self._server.sleep(stall[0].seconds)
        taken = self._take(zones, action, "error")
        if taken is not None:
            return self._error(req, params, action, taken[0], taken[1] or zone)
        lost = self._take(zones, action, "lost")

        answered = self.extras.answer(action, params, req)
        if answered is not None:
            code = _error_code(answered.body) if answered.status >= 400 else None
            if lost is None:
                self.log.append(CallRecord(action, zone, answered.status, code, injected))
                return answered
        else:
            response = self.nodegroups.rewrite(req, self.extras.rewrite(action, params, self._forward(req)))
            self._learn(response)
            code = _error_code(response.body) if response.status >= 400 else None
            if lost is None:
                self.log.append(CallRecord(action, zone, response.status, code, injected))
                return response
        # The request took effect upstream; its answer is replaced by the error (`Ec2Fault.lost`).
        return self._error(req, params, action, lost[0], lost[1] or zone)

    def _error(self, req: HttpRequest, params: Mapping[str, str], action: str, fault: Ec2Fault,
               zone: str | None) -> HttpResponse:
        """`fault`'s error answer, logged as injected."""
        ctx = self._context(params, action, zone)
        self.log.append(CallRecord(action, zone, fault.http_status, fault.code, True))
        if _REST_JSON_PATH.match(req.path):
            # EKS is a REST-JSON API: its errors are JSON with the code in x-amzn-ErrorType (EKS API
            # reference, "Common Errors"), which botocore reads; EC2's XML would not parse there.
            body = json.dumps({"message": fault.message.format_map(ctx)}).encode()
            return HttpResponse(fault.http_status, body, [("Content-Type", "application/json"),
                                                          ("x-amzn-ErrorType", fault.code)])
        body = error_xml(fault.code, fault.message.format_map(ctx))
        return HttpResponse(fault.http_status, body, list(_XML_HEADERS))

    def _take(self, zones: list[str], action: str, kind: str) -> tuple[Ec2Fault, str | None] | None:
        """First armed fault of `kind` for any of the request's zones, and the
        zone it fired for (multi-AZ requests such as CreateFleet)."""
        candidates: list[str | None] = list(zones) or [None]
        for z in candidates:
            got = self.faults.take(z, action, lambda f: f.kind == kind)
            if got is not None:
                return got, z
        return None

    @staticmethod
    def _params(req: HttpRequest) -> dict[str, str]:
        merged = {k: v[0] for k, v in req.query.items() if v}
        ctype = req.headers.get("content-type", "")
        if req.body and "x-www-form-urlencoded" in ctype:
            for k, v in parse_qs(req.body.decode("utf-8", "replace"), keep_blank_values=True).items():
                if v:
                    merged[k] = v[0]
        return merged

    def _zones(self, params: Mapping[str, str], req: HttpRequest) -> list[str]:
        zones: list[str] = []

        def add(z: str | None) -> None:
            if z and z not in zones:
                zones.append(z)

        for key, value in sorted(params.items()):
            if key.endswith("AvailabilityZone"):
                add(value)
        subnets = [v for k, v in sorted(params.items()) if k.endswith("SubnetId") and v]
        instances = [v for k, v in sorted(params.items()) if re.fullmatch(r"InstanceId\.\d+", k) and v]
        for subnet in subnets:
            add(self._resolve(self._subnet_az, subnet, "DescribeSubnets", "SubnetId.1", req))
        for instance in instances:
            add(self._resolve(self._instance_az, instance, "DescribeInstances", "InstanceId.1", req))
        return zones

    def _zone_rules_armed(self) -> bool:
        return any(r.zone is not None and (r.remaining is None or r.remaining > 0) for r in self.faults)

    def _resolve(self, cache: dict[str, str], ident: str, action: str, param: str, req: HttpRequest) -> str | None:
        with self._map_lock:
            if ident in cache:
                return cache[ident]
        if not self._zone_rules_armed():
            return None
        # Same Authorization header so moto answers from the same region and
        # account as the request being classified.
        body = f"Action={action}&Version={_EC2_API_VERSION}&{param}={ident}".encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
        if "authorization" in req.headers:
            headers["Authorization"] = req.headers["authorization"]
        self._learn(self._send("POST", "/", headers, body))
        with self._map_lock:
            return cache.get(ident)

    def _learn(self, response: HttpResponse) -> None:
        if response.status >= 300 or b"availabilityZone" not in response.body:
            return
        try:
            root = ET.fromstring(response.body)
        except ET.ParseError:
            return
        with self._map_lock:
            for elem in root.iter():
                subnet = _child_text(elem, "subnetId")
                az = _child_text(elem, "availabilityZone")
                if subnet and az and _local(elem.tag) == "item" and _child_text(elem, "vpcId"):
                    self._subnet_az[subnet] = az
                instance = _child_text(elem, "instanceId")
                placed = _find_path(elem, "placement", "availabilityZone")
                if instance and placed:
                    self._instance_az[instance] = placed

    def _context(self, params: Mapping[str, str], action: str, zone: str | None) -> _SafeFormat:
        region = _region_of(zone) if zone else ""
        others = ", ".join(f"{region}{c}" for c in "abcd" if f"{region}{c}" != zone) if region else ""
        instance_type = next(
            (v for k, v in sorted(params.items()) if k.endswith("InstanceType") and v), "the requested"
        )
        return _SafeFormat(
            zone=zone or "", region=region, other_zones=others, instance_type=instance_type, action=action
        )

    def _forward(self, req: HttpRequest) -> HttpResponse:
        path = req.path
        if req.query:
            path += "?" + urlencode([(k, v) for k, vs in req.query.items() for v in vs])
        headers = {k: v for k, v in req.headers.items() if k not in _HOP_BY_HOP}
        return self._send(req.method, path, headers, req.body)

    def _send(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> HttpResponse:
        conn = http.client.HTTPConnection(self._upstream_host, self._upstream_port, timeout=60)
        try:
            conn.request(method, path, body=body or None, headers=dict(headers))
            resp = conn.getresponse()
            data = resp.read()
            out = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP]
            return HttpResponse(resp.status, data, out)
        except OSError as exc:
            # Surface an unreachable upstream the way EC2 would surface an outage.
            return HttpResponse(503, error_xml("Unavailable", f"upstream unreachable: {exc}"), list(_XML_HEADERS))
        finally:
            conn.close()

    # -- admin HTTP API -----------------------------------------------------

    def _fault(self, doc: Mapping[str, Any]) -> Ec2Fault:
        return Ec2Fault.from_dict(doc)

    def _admin_route(self, route: tuple[str, str], data: dict[str, Any]) -> HttpResponse | None:
        """POST /_emulator/service-quota {"quotaCode", "value", "region", "serviceCode"};
        POST /_emulator/spot-placement-score {"region", "zoneId", "score", "instanceType"} (a scenario driven
        from another process: score null forgets it)."""
        if route == ("POST", "/spot-placement-score"):
            self.set_placement_score(data["region"], data["zoneId"], data.get("score"),
                                     instance_type=data.get("instanceType"))
            return json_response(200, {})
        if route != ("POST", "/service-quota"):
            return None
        self.set_service_quota(data["quotaCode"], data.get("value"), region=data.get("region"),
                               service_code=data.get("serviceCode", "ec2"))
        return json_response(200, {})


def _target_action(headers: Mapping[str, str]) -> str | None:
    target = headers.get("x-amz-target")
    return target.rsplit(".", 1)[-1] if target else None


def _error_code(body: bytes) -> str | None:
    m = re.search(rb"<Code>([^<]+)</Code>", body)
    return m.group(1).decode() if m else None


__all__ = ["Ec2Fault", "Ec2FaultProxy", "MotoServer", "error_xml"]
