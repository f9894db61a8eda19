"""Every pod of every overlay meets the "restricted" Pod Security Standard, and the namespace
enforces it (so a pod that does not would be refused by the cluster) — but for the sandbox's pods
(env, critic) of the overlays with k8s/components/sandbox, which get exactly the sandbox's rights and
nothing else, in a namespace that enforces "privileged" and warns and audits against "restricted"."""

from __future__ import annotations

import copy

import pytest

from tests.k8s.kube import (NAMESPACE, OVERLAYS, SANDBOX_CAPABILITIES, SANDBOX_OVERLAYS, SANDBOX_ROLES, pod_spec,
                            render)
from tests.k8s.pod_security import restricted_violations


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_pod_meets_the_restricted_standard(overlay: str) -> None:
    manifests = render(overlay)
    problems = []
    workloads = [*manifests.workloads(), *manifests.of_kind("Job")]
    assert workloads
    for w in workloads:
        if overlay in SANDBOX_OVERLAYS and w["metadata"]["name"] in SANDBOX_ROLES:
            continue  # test_the_sandbox_pods_get_its_rights_and_nothing_more
        template = w["spec"]["template"]
        problems += restricted_violations(pod_spec(w), template.get("metadata", {}).get("annotations"),
                                          f"{w['kind']}/{w['metadata']['name']}")
    assert problems == []


@pytest.mark.parametrize("overlay", sorted(SANDBOX_OVERLAYS))
def test_the_sandbox_pods_get_its_rights_and_nothing_more(overlay: str) -> None:
    manifests = render(overlay)
    for role in sorted(SANDBOX_ROLES):
        w = manifests.deployment(role)
        assert w["metadata"]["labels"]["rlanything.io/sandbox"] == "true"
        spec = pod_spec(w)
        name = f"Deployment/{role}"
        (container,) = spec["containers"]
        sc = container["securityContext"]
        assert set(sc["capabilities"]["add"]) == SANDBOX_CAPABILITIES and sc["capabilities"]["drop"] == ["ALL"]
        assert sorted(restricted_violations(spec, where=name)) == sorted([
            f"{name}: pod runAsUser 0", f"{name}/server: adds capabilities ['SYS_ADMIN']",
            f"{name}/server: appArmorProfile Unconfined", f"{name}/server: allowPrivilegeEscalation must be false",
            f"{name}/server: runAsNonRoot must be true (container or pod)", f"{name}/server: runAsUser 0",
            f"{name}/server: may add only NET_BIND_SERVICE, adds {sc['capabilities']['add']}"])
        assert sc["privileged"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
        # fork isolation (programs read host files) refused in the pod; an init (the pause container) reaps
        assert {"name": "RLANYTHING_SANDBOX_REFUSE_FORK", "value": "1"} in container["env"]
        assert spec["shareProcessNamespace"] is True
    others = [w for w in manifests.workloads() if w["metadata"]["name"] not in SANDBOX_ROLES]
    assert others and not any(w["metadata"].get("labels", {}).get("rlanything.io/sandbox") for w in others)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_namespace_enforces_restricted(overlay: str) -> None:
    (ns,) = [n for n in render(overlay).of_kind("Namespace") if n["metadata"]["name"] == NAMESPACE]
    labels = ns["metadata"]["labels"]
    if overlay in SANDBOX_OVERLAYS:  # the sandbox's pods are "privileged"; the rest is still checked
        assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
        assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    else:
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


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
