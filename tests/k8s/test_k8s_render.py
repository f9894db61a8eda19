"""Every kustomization renders, and every built-in object is valid for the pinned Kubernetes.

Strict validation (`kubernetes-validate --strict -k 1.33.0`, as a library call) rejects unknown
fields and wrong types offline; custom resources (KEDA, the Prometheus operator) have no schema there and are checked
structurally in test_k8s_manifests.py.
"""

from __future__ import annotations

import kubernetes_validate
import pytest
from kubernetes_validate.utils import all_versions, major_minor

from tests.k8s.kube import CRD_KINDS, KUBERNETES_VERSION, NAMESPACE, OVERLAYS, api_key, render

CLUSTER_SCOPED = {"Namespace"}


def test_pinned_kubernetes_version_ships_with_kubernetes_validate() -> None:
    shipped = {major_minor(v) for v in all_versions()}
    assert major_minor(KUBERNETES_VERSION) in shipped, (
        f"kubernetes-validate {kubernetes_validate.__version__} has no schemas for {KUBERNETES_VERSION}; "
        f"it ships {sorted(shipped)}")


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_renders_and_validates_strictly(overlay: str) -> None:
    manifests = render(overlay)
    assert manifests.objects, f"{overlay} renders nothing"
    errors = []
    for obj in manifests.objects:
        if api_key(obj) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path)
            errors.append(f"{obj['kind']}/{obj['metadata']['name']} at {where}: {exc.message}")
    assert not errors, f"{overlay} is not valid for Kubernetes {KUBERNETES_VERSION}:\n" + "\n".join(errors)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_everything_lives_in_the_rlanything_namespace(overlay: str) -> None:
    manifests = render(overlay)
    assert [o["metadata"]["name"] for o in manifests.of_kind("Namespace")] == [NAMESPACE]
    wrong = [f"{o['kind']}/{o['metadata']['name']}: {o['metadata'].get('namespace')}"
             for o in manifests.objects
             if o["kind"] not in CLUSTER_SCOPED and o["metadata"].get("namespace") != NAMESPACE]
    assert not wrong, f"objects outside namespace {NAMESPACE}: {wrong}"


def test_only_the_autoscale_and_monitoring_overlays_have_custom_resources() -> None:
    expected = {"autoscale": {"ScaledObject"}, "monitoring": {"PodMonitor"}}
    for overlay in OVERLAYS:
        crds = {o["kind"] for o in render(overlay).objects if api_key(o) in CRD_KINDS}
        assert crds == expected.get(overlay, set()), f"{overlay}: custom resources {crds}"
