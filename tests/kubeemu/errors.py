"""API errors as the API server words them: a metav1.Status body with code, reason and message."""

from __future__ import annotations

from typing import Any

from .catalog import ResourceSpec

OPTIMISTIC_LOCK = "the object has been modified; please apply your changes to the latest version and try again"

# Reasons the API server uses per status code (k8s.io/apimachinery/pkg/apis/meta/v1/types.go StatusReason*).
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error response; `body()` is the Status object the API server would send."""

    def __init__(self, code: int, reason: str, message: str, *, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        }
        if self.details:
            status["details"] = self.details
        return status


def status_error(code: int, message: str, reason: str | None = None, **kw: Any) -> ApiError:
    return ApiError(code, reason or REASONS.get(code, "Unknown"), message, **kw)


def _details(spec: ResourceSpec, name: str) -> dict[str, Any]:
    return {"name": name, "group": spec.group, "kind": spec.plural}


def not_found(spec: ResourceSpec, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{spec.qualified} "{name}" not found', details=_details(spec, name))


def unknown_resource() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource",
                    details={"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})


def already_exists(spec: ResourceSpec, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{spec.qualified} "{name}" already exists', details=_details(spec, name))


def conflict(qualified: str, name: str, why: str = OPTIMISTIC_LOCK, *, group: str = "", kind: str = "") -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
                    details={"name": name, "group": group, "kind": kind or qualified.split(".")[0]})


def invalid(spec: ResourceSpec, name: str, field: str, value: Any, why: str) -> ApiError:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    cause = f"{field}: Invalid value: {shown}: {why}"
    return ApiError(422, "Invalid", f'{spec.kind} "{name}" is invalid: {cause}', details={
        "name": name, "group": spec.group, "kind": spec.kind,
        "causes": [{"reason": "FieldValueInvalid", "message": f"Invalid value: {shown}: {why}", "field": field}],
    })


def forbidden_field(spec: ResourceSpec, name: str, field: str, why: str) -> ApiError:
    return ApiError(422, "Invalid", f'{spec.kind} "{name}" is invalid: {field}: Forbidden: {why}', details={
        "name": name, "group": spec.group, "kind": spec.kind,
        "causes": [{"reason": "FieldValueForbidden", "message": f"Forbidden: {why}", "field": field}],
    })


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def success(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        status["details"] = details
    if code != 200:
        status["code"] = code
    return status
