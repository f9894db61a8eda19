"""The three-node NATS cluster of `k8s/overlays/ha` (components/ha-nats): three pods joined by routes
under the headless Service, every stream and KV bucket replicated on all three, and no overlay whose
services ask for more replicas than its NATS has nodes."""

from __future__ import annotations

import re

import pytest

from tests.k8s.kube import CLUSTERED_NATS, K8S_DIR, OVERLAYS, main_container, named_ports, pod_spec, render
from tests.k8s.test_k8s_manifests import _mounted_file, _role_config
from tests.k8s.kube import roles_of

NODES = 3


def _nats_conf(overlay: str) -> str:
    manifests = render(overlay)
    nats = manifests.get("StatefulSet", "nats")
    container = main_container(nats)
    cm_name, key = _mounted_file(manifests, nats, container, container["args"][1])
    return manifests.configmap_data(cm_name)[key]


def _settings(conf: str) -> list[str]:
    """The conf's setting lines (comments and blank lines dropped), in order."""
    return [line.strip() for line in conf.splitlines() if line.strip() and not line.strip().startswith("#")]


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_service_replicates_streams_on_as_many_nodes_as_nats_runs(overlay: str) -> None:
    manifests = render(overlay)
    nodes = manifests.get("StatefulSet", "nats")["spec"]["replicas"]
    assert nodes == (NODES if overlay in CLUSTERED_NATS else 1), f"{overlay}: {nodes} NATS pods"
    for name in roles_of(overlay):
        config, _, _ = _role_config(manifests, name)
        # one value everywhere: a service with another would update every stream to its own on start-up
        assert config.nats.stream_replicas == nodes, (
            f"{overlay}: {name} has nats.stream_replicas={config.nats.stream_replicas}, NATS runs {nodes} pods")


def test_the_ha_nats_pods_form_one_cluster_by_routes_under_the_headless_service() -> None:
    manifests = render("ha")
    nats = manifests.get("StatefulSet", "nats")
    container = main_container(nats)
    assert nats["spec"]["podManagementPolicy"] == "Parallel"  # each node waits for the others' routes
    cluster_port = named_ports(container)["cluster"]
    headless = manifests.get("Service", nats["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert {p["name"]: p["port"] for p in headless["spec"]["ports"]}["cluster"] == cluster_port
    assert "cluster" not in {p["name"] for p in manifests.get("Service", "nats")["spec"]["ports"]}  # clients only
    conf = _nats_conf("ha")
    block = re.search(r"^cluster\s*\{(.*?)^\}", conf, re.M | re.S)
    assert block, "nats.conf has no cluster block"
    assert re.search(rf"^\s*port:\s*{cluster_port}\s*$", block.group(1), re.M)
    routes = re.findall(r"nats-route://([\w.-]+):(\d+)", block.group(1))
    headless_name = headless["metadata"]["name"]
    assert routes == [(f"nats-{i}.{headless_name}", str(cluster_port)) for i in range(NODES)], routes
    assert re.search(r"^server_name:\s*\$POD_NAME\s*$", conf, re.M), "each node needs its own server_name"
    spread = pod_spec(nats)["topologySpreadConstraints"]
    assert spread[0]["topologyKey"] == "kubernetes.io/hostname" and spread[0]["labelSelector"]["matchLabels"] == {"app": "nats"}
    pdb = manifests.get("PodDisruptionBudget", "nats")
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["selector"]["matchLabels"] == {"app": "nats"}


def test_the_ha_nats_conf_is_the_base_conf_plus_the_cluster_block() -> None:
    base = _settings((K8S_DIR / "base" / "nats" / "nats.conf").read_text())
    ha = _settings((K8S_DIR / "components" / "ha-nats" / "nats.conf").read_text())
    assert ha[:len(base)] == base, "components/ha-nats/nats.conf drifted from k8s/base/nats/nats.conf"
    assert ha[len(base)].startswith("cluster {"), ha[len(base):]
    assert _settings(_nats_conf("ha")) == ha
