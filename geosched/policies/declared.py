"""`PolicyName`: the `policy:` of a settings file (a GitOps repository's, the scheduler's, the dispatcher's), one of
the registered policies. Declared here rather than with the other fields in geosched.files.decl: the registry is
the policies' own, and the input layer sits below them (issue 25 item 3)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from geosched import policies
from geosched.files.decl.base import Refused, Text


def _known_policy(policy: str) -> str:
    if policy not in policies.names():
        raise Refused(f"unknown policy {policy!r} (known: {', '.join(policies.names())})")
    return policy


PolicyName = Annotated[Text, AfterValidator(_known_policy)]
"""A policy `geosched policies` lists."""
