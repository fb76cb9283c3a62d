"""Discovery through `Kube.resource`: what a cluster serves, asked again once it may have changed."""

from __future__ import annotations

from geosched.kube.client import Kube
from tests.kubeemu import MultiCluster

WIDGET = ("widgets.example.com/v1", "Widget")
# A CRD as `kubectl apply` installs one (apiextensions.k8s.io/v1; a group no part of geosched knows).
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.widgets.example.com"},
       "spec": {"group": "widgets.example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_a_kind_installed_after_it_was_asked_for_is_found(clusters: MultiCluster) -> None:
    # Kube.resource cached "not served" for the life of the client: a CRD installed meanwhile stayed invisible.
    cluster = next(iter(clusters))
    with Kube.open(cluster.name) as kube:
        assert kube.resource(*WIDGET) is None
        cluster.create(CRD)
        found = kube.resource(*WIDGET)
        assert found is not None and found.plural == "widgets" and found.namespaced
