"""NetworkPolicies allow exactly the flows of the architecture (README) and deny everything else.

The rendered policies are evaluated (tests/k8s/kube.py: `flow_allowed`) for every pair of pods
and every container port, so a policy that opens too much fails as surely as one that opens too
little.
"""

from __future__ import annotations

import pytest

from tests.k8s.kube import (
    CLUSTERED_NATS,
    NAMESPACE,
    OVERLAYS,
    ROLES,
    SHARDED,
    Peer,
    egress_allowed,
    flow_allowed,
    ingress_allowed,
    render,
    workload_peer,
)

OVERLAYS_WITH_POLICIES = sorted(OVERLAYS)
PART_OF = {"app.kubernetes.io/part-of": "rlanything"}


def _expected_in_namespace(src: str, dst: str, port: int, overlay: str = "default") -> bool:
    """The pod-to-pod flows of the architecture (README) inside the namespace."""
    if src == dst and src in SHARDED.get(overlay, set()):
        return True  # rank pods of one sharded trainer: rendezvous 29500 and NCCL's ephemeral ports
    if src == dst == "nats" and port == 6222:
        return overlay in CLUSTERED_NATS  # components/ha-nats: the routes between the NATS nodes
    if dst == "nats":
        return port == 4222 and (src in ROLES or src == "reward-judge-shadow")  # every service -> the event bus
    if dst == "user-env":
        return port == 50071 and src == "env"  # overlays/remote-env: the user's Environment server
    if dst == "env":
        return port == 50051 and src == "policy-rollout"  # Reset/Step/Close
    return False


def _expected_ingress(src: str, dst: str, port: int, overlay: str = "default") -> bool:
    """What each destination admits on its own (defence in depth: not relying on the sender's egress)."""
    if dst == "nats":
        if port == 6222:
            return src == "nats" and overlay in CLUSTERED_NATS  # the routes, from NATS pods only
        return port == 4222  # every pod labelled part-of=rlanything (NATS itself included)
    if dst == "policy-rollout":
        return port == 8000  # products anywhere in the namespace
    if dst == "ingest":
        return port == 8080  # products post conversations and feedback
    return _expected_in_namespace(src, dst, port, overlay)


@pytest.mark.parametrize("overlay", OVERLAYS_WITH_POLICIES)
def test_pods_of_the_namespace_reach_only_what_design_allows(overlay: str) -> None:
    manifests = render(overlay)
    policies = manifests.of_kind("NetworkPolicy")
    assert any(p["metadata"]["name"] == "deny-all" and p["spec"]["podSelector"] == {}
               and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"} for p in policies), "default deny missing"
    peers = {w["metadata"]["name"]: workload_peer(w) for w in manifests.workloads()}
    wrong = []
    for src_name, src in peers.items():
        for dst_name, dst in peers.items():
            for port in sorted({p for _, p in dst.ports}):
                allowed = flow_allowed(policies, src, dst, port)
                if allowed != _expected_in_namespace(src_name, dst_name, port, overlay):
                    wrong.append(f"{src_name} -> {dst_name}:{port} is {'allowed' if allowed else 'denied'}")
                sent = egress_allowed(policies, src, dst, port)
                if sent != _expected_in_namespace(src_name, dst_name, port, overlay):
                    wrong.append(f"{src_name} -> {dst_name}:{port}: egress {'allowed' if sent else 'denied'} at {src_name}")
                admitted = ingress_allowed(policies, src, dst, port)
                if admitted != _expected_ingress(src_name, dst_name, port, overlay):
                    wrong.append(f"{src_name} -> {dst_name}:{port}: ingress {'allowed' if admitted else 'denied'} at {dst_name}")
    assert not wrong, f"{overlay}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("overlay", OVERLAYS_WITH_POLICIES)
def test_nats_accepts_clients_only_from_rlanything_pods(overlay: str) -> None:
    manifests = render(overlay)
    policies = manifests.of_kind("NetworkPolicy")
    nats = workload_peer(manifests.get("StatefulSet", "nats"))
    strangers = [
        Peer.make(NAMESPACE, {"app": "something-else"}),               # unlabelled pod of the namespace
        Peer.make("default", PART_OF),                                # the right label, another namespace
        Peer.make("monitoring", {"app": "prometheus"}),
        Peer.make("keda", {"app": "keda-operator"}),
    ]
    for peer in strangers:
        assert not flow_allowed(policies, peer, nats, 4222), f"{peer} reaches NATS 4222"
    for name in ROLES:
        assert flow_allowed(policies, workload_peer(manifests.workload(name)), nats, 4222), name
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            assert not any("ipBlock" in peer for peer in rule.get("from") or []), f"{policy['metadata']['name']}: ipBlock ingress"


@pytest.mark.parametrize("overlay", OVERLAYS_WITH_POLICIES)
def test_prometheus_scrapes_metrics_ports_only(overlay: str) -> None:
    manifests = render(overlay)
    policies = manifests.of_kind("NetworkPolicy")
    prometheus = Peer.make("monitoring", {"app.kubernetes.io/name": "prometheus"})
    other = Peer.make("observability", {"app.kubernetes.io/name": "prometheus"})
    for name in ROLES:
        pod = workload_peer(manifests.workload(name))
        ports = dict(pod.ports)
        assert flow_allowed(policies, prometheus, pod, ports["metrics"]), f"{name}: metrics not scrapable"
        assert not flow_allowed(policies, other, pod, ports["metrics"]), f"{name}: scrapable from any namespace"
        for port_name in set(ports) - {"metrics"}:
            assert not flow_allowed(policies, prometheus, pod, ports[port_name]), f"{name}:{port_name} open to monitoring"
    nats = workload_peer(manifests.get("StatefulSet", "nats"))
    assert flow_allowed(policies, prometheus, nats, 8222)


@pytest.mark.parametrize("overlay", OVERLAYS_WITH_POLICIES)
def test_products_reach_the_policy_openai_endpoint(overlay: str) -> None:
    manifests = render(overlay)
    policies = manifests.of_kind("NetworkPolicy")
    rollout = workload_peer(manifests.deployment("policy-rollout"))
    product_ns = Peer.make("shop", {"app": "frontend"}, namespace_labels={"rlanything.io/policy-client": "true"})
    unlabelled_ns = Peer.make("shop", {"app": "frontend"})
    assert flow_allowed(policies, product_ns, rollout, 8000)
    assert not flow_allowed(policies, product_ns, rollout, 50051), "products use HTTP, not the gRPC port"
    assert not flow_allowed(policies, unlabelled_ns, rollout, 8000)
    # A product pod in the namespace is let in at the policy pods (its own egress is up to its owner).
    in_namespace = Peer.make(NAMESPACE, {"app": "product"})
    assert ingress_allowed(policies, in_namespace, rollout, 8000)
    assert not ingress_allowed(policies, in_namespace, rollout, 50051)
    # ... and the ingest API, over HTTP only; no other service of the system.
    ingest = workload_peer(manifests.deployment("ingest"))
    assert flow_allowed(policies, product_ns, ingest, 8080)
    assert not flow_allowed(policies, product_ns, ingest, 50051) and not flow_allowed(policies, unlabelled_ns, ingest, 8080)
    for name in set(ROLES) - {"policy-rollout", "ingest"}:
        pod = workload_peer(manifests.workload(name))
        assert not any(flow_allowed(policies, product_ns, pod, port) for _, port in pod.ports), name


def test_keda_reads_nats_monitoring_only_in_the_autoscale_overlay() -> None:
    keda = Peer.make("keda", {"app": "keda-operator"})
    for overlay in OVERLAYS:
        manifests = render(overlay)
        policies = manifests.of_kind("NetworkPolicy")
        nats = workload_peer(manifests.get("StatefulSet", "nats"))
        assert flow_allowed(policies, keda, nats, 8222) == (overlay == "autoscale"), overlay
        assert not flow_allowed(policies, keda, nats, 4222), overlay


def test_openai_judge_may_call_its_server() -> None:
    manifests = render("openai-judge")
    policies = manifests.of_kind("NetworkPolicy")
    judge = workload_peer(manifests.deployment("reward-judge"))
    server = Peer.make("llm", {"app": "llm-judge"}, ports={"http": 8000})
    assert flow_allowed(policies, judge, server, 8000)
    for name in set(ROLES) - {"reward-judge"}:
        assert not flow_allowed(policies, workload_peer(manifests.workload(name)), server, 8000), name
