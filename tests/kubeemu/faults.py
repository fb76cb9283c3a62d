"""Runtime fault injection and the request log. Both are touched from the test thread and the server thread,
hence the locks."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import REASONS, ApiError


@dataclass
class FaultRule:
    """Answer the next `times` matching requests with `status` (after sleeping `hang` seconds), or only sleep
    `hang` seconds and then serve normally when `status` is None. `times=None` never runs out."""

    status: int | None = None
    times: int | None = 1
    method: str | None = None
    path: re.Pattern[str] | None = None
    hang: float = 0.0
    retry_after: int | None = None
    watch: bool | None = None
    message: str | None = None
    fired: int = 0

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if self.path is not None and not self.path.search(path):
            return False
        return self.watch is None or self.watch == is_watch

    def error(self, path: str) -> ApiError:
        assert self.status is not None
        code = self.status
        headers: dict[str, str] = {}
        details: dict[str, Any] | None = None
        retry_after = self.retry_after if self.retry_after is not None else (1 if code == 429 else None)
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
            details = {"retryAfterSeconds": retry_after}
        default = {
            409: f"Operation cannot be fulfilled on {path}: the object has been modified; please apply your "
                 "changes to the latest version and try again",
            429: "Too many requests, please try again later.",
            500: "Internal error occurred: injected fault",
            503: "the server is currently unable to handle the request",
            504: "Timeout: request did not complete within the allotted timeout",
        }.get(code, f"injected fault {code}")
        return ApiError(code, REASONS.get(code, "Unknown"), self.message or default, details=details,
                        headers=headers)


class FaultRules:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, method: str, path: str, is_watch: bool) -> FaultRule | None:
        """The oldest armed rule matching the request, consumed by one firing."""
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path, is_watch):
                    rule.fired += 1
                    return rule
        return None

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def armed(self) -> list[FaultRule]:
        with self._lock:
            return [r for r in self._rules if r.times is None or r.fired < r.times]


@dataclass
class RequestRecord:
    seq: int
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    token: str | None
    watch: bool
    body: Any = None
    fault: FaultRule | None = None
    status: int | None = None  # set when the response is complete (a watch: when its stream ends)
    at: float = field(default_factory=time.monotonic)


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []

    def add(self, **kw: Any) -> RequestRecord:
        with self._lock:
            record = RequestRecord(seq=len(self._records), **kw)
            self._records.append(record)
            return record

    def snapshot(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def count(self, method: str | None = None, path: str | re.Pattern[str] | None = None, *,
              watch: bool | None = None, faulted: bool | None = None) -> int:
        pattern = re.compile(path) if isinstance(path, str) else path
        return sum(
            1 for r in self.snapshot()
            if (method is None or r.method == method.upper())
            and (pattern is None or pattern.search(r.path))
            and (watch is None or r.watch == watch)
            and (faulted is None or (r.fault is not None) == faulted)
        )
