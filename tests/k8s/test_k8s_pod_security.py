"""Every pod of every overlay meets the "restricted" Pod Security Standard, and the namespace
enforces it (so a pod that does not would be refused by the cluster)."""

from __future__ import annotations

import copy

import pytest

from tests.k8s.kube import NAMESPACE, OVERLAYS, pod_spec, render
from tests.k8s.pod_security import restricted_violations


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_pod_meets_the_restricted_standard(overlay: str) -> None:
    manifests = render(overlay)
    problems = []
    workloads = [*manifests.workloads(), *manifests.of_kind("Job")]
    assert workloads
    for w in workloads:
        template = w["spec"]["template"]
        problems += restricted_violations(pod_spec(w), template.get("metadata", {}).get("annotations"),
                                          f"{w['kind']}/{w['metadata']['name']}")
    assert problems == []


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_namespace_enforces_restricted(overlay: str) -> None:
    (ns,) = [n for n in render(overlay).of_kind("Namespace") if n["metadata"]["name"] == NAMESPACE]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_check_catches_each_kind_of_violation() -> None:
    w = render("default").deployment("critic")
    good = pod_spec(w)
    assert restricted_violations(good) == []
    breaks = {
        "hostNetwork": lambda s: s.update(hostNetwork=True),
        "hostPath": lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "privileged": lambda s: s["containers"][0]["securityContext"].update(privileged=True),
        "allowPrivilegeEscalation": lambda s: s["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
        "drop ALL": lambda s: s["containers"][0]["securityContext"]["capabilities"].update(drop=[]),
        "NET_BIND_SERVICE": lambda s: s["containers"][0]["securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
        "hostPort": lambda s: s["containers"][0].setdefault("ports", []).append({"containerPort": 1, "hostPort": 80}),
        "runAsUser 0": lambda s: s["containers"][0]["securityContext"].update(runAsUser=0),
        "seccompProfile": lambda s: (s["securityContext"].pop("seccompProfile", None),
                                     s["containers"][0]["securityContext"].pop("seccompProfile", None)),
        "sysctl": lambda s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
        "procMount": lambda s: s["containers"][0]["securityContext"].update(procMount="Unmasked"),
    }
    for needle, change in breaks.items():
        spec = copy.deepcopy(good)
        change(spec)
        found = restricted_violations(spec)
        assert any(needle in p for p in found), (needle, found)
