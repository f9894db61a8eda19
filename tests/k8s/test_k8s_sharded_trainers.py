"""The sharded-trainers overlay (k8s/components/sharded-trainers): each trainer is a StatefulSet of
rank pods started by `torchrun`, rendezvousing on rank 0's pod through a headless Service.

The torchrun command is parsed with torchrun's own argument parser, so an option it would reject
fails here; the rest reads the rendered objects (and the pod template is compared with the
default's Deployment: only the launcher and what it needs may differ).
"""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.k8s.kube import (
    K8S_DIR,
    NAMESPACE,
    ROLES,
    SHARDED,
    Manifests,
    Peer,
    container_env,
    expand_vars,
    find_kubectl,
    flow_allowed,
    main_container,
    named_ports,
    parse_service_command,
    pod_spec,
    render,
    workload_peer,
)

OVERLAY = "sharded-trainers"
TRAINERS = sorted(SHARDED[OVERLAY])
EPHEMERAL_PORT = 41234
"""A port from the ephemeral range, where NCCL's bootstrap and socket transport listen."""


def _torchrun(manifests: Manifests, name: str) -> Any:
    """torchrun's parsed arguments for pod 0 of ``name`` ($(VAR) expanded as the kubelet does)."""
    run = pytest.importorskip("torch.distributed.run")
    sts = manifests.get("StatefulSet", name)
    container = main_container(sts)
    env = container_env(manifests, sts, container)
    command = [expand_vars(a, env) for a in [*container["command"], *container.get("args", [])]]
    assert command[0] == "torchrun", command
    return run.get_args_parser().parse_args(command[1:])


def _strip_hash(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_hash(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strip_hash(v) for v in obj]
    if isinstance(obj, str) and obj.startswith(("rlanything-config-", "nats-config-", "nats-auth-")):
        return obj.rsplit("-", 1)[0]
    return obj


@pytest.mark.parametrize("name", TRAINERS)
def test_the_trainer_is_a_statefulset_and_no_deployment_of_it_remains(name: str) -> None:
    manifests = render(OVERLAY)
    assert name not in {d["metadata"]["name"] for d in manifests.of_kind("Deployment")}
    labels = manifests.get("StatefulSet", name)["spec"]["template"]["metadata"]["labels"]
    others = [w["metadata"]["name"] for w in manifests.workloads()
              if w["spec"]["template"]["metadata"]["labels"].get("app") == labels["app"]]
    assert others == [name], f"pods labelled app={labels['app']}: {others}"
    spec = manifests.get("StatefulSet", name)["spec"]
    assert spec["serviceName"] == f"{name}-ranks"
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"] == {"type": "OnDelete"}


@pytest.mark.parametrize("name", TRAINERS)
def test_torchrun_launches_the_trainer_on_every_rank_pod(name: str) -> None:
    manifests = render(OVERLAY)
    sts = manifests.get("StatefulSet", name)
    container = main_container(sts)
    args = _torchrun(manifests, name)
    module, role = ROLES[name]
    assert args.nnodes == str(sts["spec"]["replicas"]), "--nnodes must equal the StatefulSet's replicas"
    assert int(args.nnodes) >= 2
    assert args.max_restarts == 0, "a failed rank ends the group; Kubernetes restarts the pods"
    assert args.rdzv_backend == "static" and args.node_rank == 0  # pod 0: its index
    (node_rank,) = [a.removeprefix("--node-rank=$(").removesuffix(")") for a in container["command"]
                    if a.startswith("--node-rank=")]
    source = {e["name"]: e.get("valueFrom", {}) for e in container["env"]}[node_rank]
    assert source["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']", "node rank = pod index"
    # The rendezvous: rank 0's pod by its DNS name in the headless Service, on the Service's port.
    ranks = manifests.get("Service", sts["spec"]["serviceName"])
    assert args.master_addr == f"{name}-0.{ranks['metadata']['name']}.{NAMESPACE}.svc"
    (port,) = ranks["spec"]["ports"]
    assert args.master_port == port["port"] == port["targetPort"] == named_ports(container)["rendezvous"] == 29500
    # The trainer itself: the same module, config and overrides as the default's Deployment.
    assert args.module and args.training_script == f"services.{module}"
    default = main_container(render("default").deployment(name))
    assert container["args"] == default["args"] and len(args.training_script_args) == len(default["args"])
    command = parse_service_command(container)
    assert command.module == module and role in command.overrides


@pytest.mark.parametrize("name", TRAINERS)
def test_every_rank_pod_gets_one_gpu_per_process_and_a_memory_backed_dev_shm(name: str) -> None:
    manifests = render(OVERLAY)
    sts = manifests.get("StatefulSet", name)
    container = main_container(sts)
    per_pod = int(_torchrun(manifests, name).nproc_per_node)
    resources = container["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == per_pod
    spec = pod_spec(sts)
    assert any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", []))
    volumes = {v["name"]: v for v in spec["volumes"]}
    (shm,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    assert volumes[shm["name"]]["emptyDir"]["medium"] == "Memory", "NCCL needs more than the runtime's 64 MiB /dev/shm"


@pytest.mark.parametrize("name", TRAINERS)
def test_the_rendezvous_service_is_headless_and_selects_exactly_the_rank_pods(name: str) -> None:
    manifests = render(OVERLAY)
    sts = manifests.get("StatefulSet", name)
    ranks = manifests.get("Service", sts["spec"]["serviceName"])["spec"]
    assert ranks["clusterIP"] == "None", "pod DNS names need a headless Service"
    assert ranks["publishNotReadyAddresses"] is True, "ranks resolve each other before they are Ready"
    assert ranks["selector"] == sts["spec"]["selector"]["matchLabels"]
    selected = [w["metadata"]["name"] for w in manifests.workloads()
                if all(w["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in ranks["selector"].items())]
    assert selected == [name]
    # gRPC and metrics still go through the ClusterIP Service of the default, to every rank pod.
    service = manifests.get("Service", name)["spec"]
    assert service.get("type") == "ClusterIP" and service["selector"] == ranks["selector"]


@pytest.mark.parametrize("name", TRAINERS)
def test_rank_pods_keep_the_pod_template_of_the_default_deployment(name: str) -> None:
    """Security context, init container, probes, env, volumes: only the launcher and its needs change."""
    sharded = copy.deepcopy(render(OVERLAY).get("StatefulSet", name)["spec"]["template"])
    default = copy.deepcopy(render("default").deployment(name)["spec"]["template"])
    for template in (sharded, default):
        server = template["spec"]["containers"][0]
        server.pop("command")
        server.pop("resources")  # P GPUs per pod (checked above)
        server["env"] = [e for e in server["env"] if e["name"] not in ("NODE_RANK", "POD_NAMESPACE")]
        server["ports"] = [p for p in server["ports"] if p["name"] != "rendezvous"]
    assert _strip_hash(sharded) == _strip_hash(default)


@pytest.mark.parametrize("name", TRAINERS)
def test_rank_pods_reach_each_other_and_nothing_else_opens(name: str) -> None:
    manifests = render(OVERLAY)
    policies = manifests.of_kind("NetworkPolicy")
    rank = workload_peer(manifests.get("StatefulSet", name))
    for port in (29500, EPHEMERAL_PORT, 50051):
        assert flow_allowed(policies, rank, rank, port), f"{name} ranks cannot reach each other on {port}"
    outsiders = [workload_peer(w) for w in manifests.workloads() if w["metadata"]["name"] != name]
    outsiders += [Peer.make(NAMESPACE, {"app": "product"}), Peer.make("monitoring", {"app": "prometheus"})]
    for other in outsiders:
        for port in (29500, EPHEMERAL_PORT):
            assert not flow_allowed(policies, other, rank, port), f"{dict(other.pod_labels)} -> {name}:{port}"
            assert not flow_allowed(policies, rank, other, port), f"{name} -> {dict(other.pod_labels)}:{port}"


def test_only_the_trainers_change_and_the_checkpoints_volume_is_shared() -> None:
    default, sharded = render("default"), render(OVERLAY)
    for name in set(ROLES) - set(TRAINERS):
        assert _strip_hash(sharded.deployment(name)) == _strip_hash(default.deployment(name)), name
    names = {(o["kind"], o["metadata"]["name"]) for o in sharded.objects}
    before = {(o["kind"], o["metadata"]["name"]) for o in default.objects}
    added = {(kind, f"{t}-ranks") for t in TRAINERS for kind in ("Service", "NetworkPolicy")}
    moved = {(kind, t) for t in TRAINERS for kind in ("Deployment", "StatefulSet")}
    assert names ^ before == added | moved
    # Rank pods run on different nodes and all mount /checkpoints: the claim must be ReadWriteMany.
    assert sharded.get("PersistentVolumeClaim", "checkpoints")["spec"]["accessModes"] == ["ReadWriteMany"]


def test_the_component_does_not_depend_on_its_place_among_the_components(tmp_path: Path) -> None:
    """Listed before components/gpu, the rank pods come out the same."""
    def rel(path: Path) -> str:
        return os.path.relpath(path, tmp_path)

    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": NAMESPACE,
        "resources": [rel(K8S_DIR / "base")],
        "components": [rel(K8S_DIR / "components" / c)
                       for c in ("images", "sharded-trainers", "gpu", "network-policies")],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    result = subprocess.run([find_kubectl(), "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    reordered = Manifests([d for d in yaml.safe_load_all(result.stdout) if d])
    for name in TRAINERS:
        assert reordered.get("StatefulSet", name) == render(OVERLAY).get("StatefulSet", name)
