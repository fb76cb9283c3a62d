"""Kubernetes quantities, read without the kubernetes package (an extra): the job readers count cpu and memory
requests in the core install. Checked against the client's own parser where it is installed, on the forms the
API server's grammar allows (k8s.io/apimachinery pkg/api/resource/quantity.go)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from geosched.kube.quantity import parse_quantity

FORMS = ["100m", "1", "1.5", "2Gi", "512Mi", "16105592Ki", "1124Gi", "1k", "1M", "7T", "2P", "3E", "1Ei", "1e3",
         "1E3", "2e-3", "0.5", ".5", "1.", "+1", "1n", "10u", 4, 2.5]


@pytest.mark.parametrize("value", FORMS, ids=str)
def test_each_form_reads_as_the_kubernetes_client_reads_it(value: object) -> None:
    client = pytest.importorskip("kubernetes.utils.quantity")
    assert parse_quantity(value) == Decimal(client.parse_quantity(value))


@pytest.mark.parametrize("value", ["1K", "abc", "1Gib", "", "1e", "--1", "1.2.3", "1e9999", "9" * 65, True, None,
                                   float("nan"), [1]], ids=repr)
def test_what_is_not_a_quantity_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(value)
