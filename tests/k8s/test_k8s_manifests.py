"""The rendered manifests agree with each other and with the run config the services read.

Each test states one property of every overlay (or of the overlays it concerns) and names the
object and field that breaks it.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest

from services.common.config import SERVICE_NAMES, RunConfig
from tests.k8s.kube import (
    EXTRA_WORKLOADS,
    GPU_ROLES,
    NAMESPACE,
    OVERLAYS,
    ROLES,
    SANDBOX_OVERLAYS,
    SANDBOX_ROLES,
    SCALERS,
    SHARDED,
    Manifests,
    all_containers,
    container_env,
    effective_config,
    expand_vars,
    main_container,
    named_ports,
    parse_service_command,
    pod_spec,
    render,
    roles_of,
)

ALL = sorted(OVERLAYS)
GPU_OVERLAYS = ["default", "autoscale", "openai-judge", "monitoring", "shadow-judge", "remote-env", "vllm-policy",
                "custom-critic", "sharded-trainers", "ha", "coding"]
SCALABLE = {"env", "policy-rollout", "reward-judge"}
"""Roles whose replica count belongs to `kubectl scale` / KEDA (no `replicas` in the manifest)."""
SINGLETONS = {"policy-trainer", "reward-trainer", "critic"}


def _mounted_file(manifests: Manifests, workload: dict[str, Any], container: dict[str, Any],
                  path: str) -> tuple[str, str]:
    """(ConfigMap name, key) of the file at ``path`` inside ``container``."""
    volumes = {v["name"]: v for v in pod_spec(workload).get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        mount_path = PurePosixPath(mount["mountPath"])
        if PurePosixPath(path).parent == mount_path:
            source = volumes[mount["name"]]
            assert "configMap" in source, f"{path} is not from a ConfigMap: {source}"
            name = source["configMap"]["name"]
            key = PurePosixPath(path).name
            assert key in manifests.configmap_data(name), f"ConfigMap {name} has no key {key}"
            return name, key
    raise AssertionError(f"{workload['metadata']['name']}: nothing is mounted at {PurePosixPath(path).parent}")


def _role_config(manifests: Manifests, name: str) -> tuple[RunConfig, list[str], dict[str, str]]:
    """(effective RunConfig, expanded overrides, env) of Deployment (or sharded StatefulSet) ``name``."""
    deployment = manifests.workload(name)
    container = main_container(deployment)
    command = parse_service_command(container)
    env = container_env(manifests, deployment, container)
    cm_name, key = _mounted_file(manifests, deployment, container, command.config_path)
    overrides = [expand_vars(o, env) for o in command.overrides]
    return effective_config(manifests.configmap_data(cm_name)[key], overrides), overrides, env


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_FACTORS = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _quantity(value: str | int) -> float:
    m = _QUANTITY.match(str(value))
    assert m, f"not a quantity: {value!r}"
    return float(m.group(1)) * _FACTORS[m.group(2)]


def _gpus(workload: dict[str, Any]) -> list[tuple[Any, Any]]:
    return [(c["resources"].get("requests", {}).get("nvidia.com/gpu"), c["resources"].get("limits", {}).get("nvidia.com/gpu"))
            for c in all_containers(workload)
            if "nvidia.com/gpu" in c["resources"].get("requests", {}) or "nvidia.com/gpu" in c["resources"].get("limits", {})]


# ---- objects and wiring ------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", ALL)
def test_every_role_has_a_deployment_service_and_service_account(overlay: str) -> None:
    manifests = render(overlay)
    sharded = SHARDED.get(overlay, set())
    assert {d["metadata"]["name"] for d in manifests.of_kind("Deployment")} == (
        set(ROLES) - sharded | set(EXTRA_WORKLOADS.get(overlay, {})))
    assert {s["metadata"]["name"] for s in manifests.of_kind("StatefulSet")} == {"nats"} | sharded
    services = {s["metadata"]["name"] for s in manifests.of_kind("Service")}
    accounts = {a["metadata"]["name"]: a for a in manifests.of_kind("ServiceAccount")}
    for workload in manifests.workloads():
        name = workload["metadata"]["name"]
        spec = pod_spec(workload)
        assert name in services, f"no Service for {name}"
        assert spec["serviceAccountName"] == name and name in accounts, f"{name}: own ServiceAccount expected"
        assert spec.get("automountServiceAccountToken") is False, f"{name}: the services never call the Kubernetes API"


@pytest.mark.parametrize("overlay", ALL)
def test_service_selectors_match_their_pods_and_ports(overlay: str) -> None:
    manifests = render(overlay)
    for service in manifests.of_kind("Service"):
        name, spec = service["metadata"]["name"], service["spec"]
        selector = spec.get("selector") or {}
        assert selector, f"Service {name} has no selector"
        matched = [w for w in manifests.workloads()
                   if all(w["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in selector.items())]
        assert len(matched) == 1, f"Service {name} selects {[w['metadata']['name'] for w in matched]}"
        workload = matched[0]
        container_ports = {p: n for c in all_containers(workload) for n, p in named_ports(c).items()}
        for port in spec["ports"]:
            target = port.get("targetPort", port["port"])
            number = named_ports(main_container(workload)).get(target) if isinstance(target, str) else target
            assert number in container_ports, f"Service {name} port {port['name']}: no container port {target}"
            assert container_ports[number] == port["name"], (
                f"Service {name}: port {port['name']} targets the container port named {container_ports[number]}")
            if port["name"] == "grpc":
                assert port.get("appProtocol") == "grpc", f"Service {name}: gRPC port needs appProtocol: grpc"


@pytest.mark.parametrize("overlay", ALL)
def test_run_config_in_the_configmap_is_valid(overlay: str) -> None:
    manifests = render(overlay)
    for name in roles_of(overlay):
        config, _, _ = _role_config(manifests, name)  # raises ConfigError with the bad keys
        assert config.nats.url.startswith("nats://")


@pytest.mark.parametrize("overlay", ALL)
def test_commands_select_the_service_and_role(overlay: str) -> None:
    manifests = render(overlay)
    for name, (module, role) in roles_of(overlay).items():
        command = parse_service_command(main_container(manifests.workload(name)))
        assert command.module == module and module in SERVICE_NAMES, f"{name} runs services.{command.module}"
        assert command.config_path == "/etc/rlanything/run.yaml"
        role_sets = [o for o in command.overrides if o.startswith(f"{module}.role=")]
        assert role_sets == ([role] if role else []), f"{name}: role overrides {role_sets}"


@pytest.mark.parametrize("overlay", ALL)
def test_ports_probes_and_nats_url_agree_with_the_run_config(overlay: str) -> None:
    manifests = render(overlay)
    nats_service = manifests.get("Service", "nats")
    nats_client_port = {p["name"]: p["port"] for p in nats_service["spec"]["ports"]}["client"]
    auth = manifests.secret_data(_secret_of(manifests, "NATS_PASSWORD"))
    for name, (module, _) in roles_of(overlay).items():
        deployment = manifests.workload(name)
        container = main_container(deployment)
        config, overrides, _ = _role_config(manifests, name)
        server = getattr(config, module).server
        where = f"{overlay}: {deployment['kind']} {name}"
        assert server.host == "0.0.0.0", f"{where}: {module}.server.host must be 0.0.0.0 in a pod"
        ports = named_ports(container)
        assert ports["grpc"] == server.grpc_port, f"{where}: containerPort grpc {ports['grpc']} != {module}.server.grpc_port {server.grpc_port}"
        assert ports["metrics"] == server.metrics_port, f"{where}: containerPort metrics != {module}.server.metrics_port"
        # HTTP for products: the rollout role's OpenAI endpoint (policy.openai_port), the ingest API.
        # Rank pods of a sharded trainer: torchrun's rendezvous port too (test_k8s_sharded_trainers.py).
        rendezvous = {"rendezvous"} if name in SHARDED.get(overlay, set()) else set()
        assert set(ports) <= {"grpc", "metrics", "http"} | rendezvous and rendezvous <= set(ports)
        assert ("http" in ports) == (name in ("policy-rollout", "ingest"))
        if "http" in ports:
            http_port = config.policy.openai_port if module == "policy" else config.ingest.http_port
            assert ports["http"] == http_port, f"{where}: containerPort http != the run config's HTTP port"
        service_ports = {p["name"]: p["port"] for p in manifests.get("Service", name)["spec"]["ports"]}
        assert service_ports["grpc"] == server.grpc_port and service_ports["metrics"] == server.metrics_port
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container[kind]
            assert "grpc" in probe, f"{where}: {kind} must be a native grpc probe"
            assert probe["grpc"]["port"] == server.grpc_port, f"{where}: {kind} port != {module}.server.grpc_port"
            assert probe["grpc"].get("service", "") == "", f"{where}: {kind} must check the whole server (service \"\")"
        # NOT_SERVING while NATS is lost: the kubelet restarts the pod only after the process had its own
        # chance to reconnect (it exits 69 naming NATS once nats.reconnect_budget_s is spent).
        live = container["livenessProbe"]
        window = live.get("periodSeconds", 10) * live.get("failureThreshold", 3)
        own = config.nats.dead_connection_bound_s + config.nats.reconnect_budget_s
        assert window > own, (f"{where}: livenessProbe restarts after {window} s of NOT_SERVING, before the process "
                              f"gives NATS up itself ({own:g} s: dead-connection bound + nats.reconnect_budget_s)")
        grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
        assert grace > server.grace_s, f"{where}: terminationGracePeriodSeconds {grace} <= {module}.server.grace_s"
        # NATS: the URL the service connects with is the in-cluster Service with the Secret's credentials,
        # at the host:port the ConfigMap's run.yaml names.
        url = urlsplit(config.nats.url)
        cm_url = urlsplit(effective_config(_run_yaml(manifests, deployment), []).nats.url)
        assert (url.hostname, url.port) == (cm_url.hostname, cm_url.port), f"{where}: nats.url override vs run.yaml"
        assert url.hostname == "nats" and url.port == nats_client_port, f"{where}: nats.url {config.nats.url}"
        # the credentials come from the Secret through the environment, never on a command line (any
        # process of the node, model-written code in a weaker sandbox included, reads /proc/<pid>/cmdline)
        assert (url.username, url.password) == (None, None), f"{where}: credentials in nats.url"
        env = {e["name"]: e for e in container.get("env", [])}
        for key, name in (("NATS_USER", config.nats.user_env), ("NATS_PASSWORD", config.nats.password_env)):
            assert name is not None and env[name]["valueFrom"]["secretKeyRef"]["key"] == key, f"{where}: {key}"
        argv = " ".join([*container.get("command", []), *container.get("args", [])])
        assert "NATS_PASSWORD" not in argv and auth["NATS_PASSWORD"] not in argv, f"{where}: password in argv"
        assert not any("$(" in o for o in overrides), f"{where}: unresolved variable in {overrides}"


@pytest.mark.parametrize("overlay", ALL)
def test_service_addresses_paths_and_threads_in_the_run_config_fit_the_pods(overlay: str) -> None:
    manifests = render(overlay)
    env_grpc = {p["name"]: p["port"] for p in manifests.get("Service", "env")["spec"]["ports"]}["grpc"]
    for name, (module, _) in roles_of(overlay).items():
        deployment = manifests.workload(name)
        container = main_container(deployment)
        config, _, _ = _role_config(manifests, name)
        section = getattr(config, module)
        where = f"{overlay}: {deployment['kind']} {name}"
        writable = [m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")]
        read_only = [m["mountPath"] for m in container["volumeMounts"] if m.get("readOnly")]

        def under(path: str, mounts: list[str]) -> bool:
            return any(PurePosixPath(path).is_relative_to(m) for m in mounts)

        if module == "env":
            assert under(config.env.cache_dir, writable), f"{where}: env.cache_dir {config.env.cache_dir} is not a volume"
        if module in ("policy", "reward"):
            assert under(section.model.cache_dir, writable), f"{where}: {module}.model.cache_dir is not a writable volume"
            trains = name.endswith("trainer")
            assert under(section.checkpoint_dir, writable if trains else read_only), (
                f"{where}: {module}.checkpoint_dir {section.checkpoint_dir} must be the checkpoints volume "
                f"({'writable' if trains else 'read-only'})")
            cpu_limit = _quantity(container["resources"]["limits"]["cpu"])
            runs_model = not (module == "reward" and section.backend == "openai")  # an external judge runs no model here
            assert not runs_model or 1 <= section.model.threads <= cpu_limit, (
                f"{where}: {module}.model.threads {section.model.threads} must be set and <= the CPU limit {cpu_limit}")
        if name == "policy-rollout":
            host, _, port = config.policy.rollout.env_address.rpartition(":")
            assert (host, int(port)) == ("env-pods", env_grpc), (
                f"{where}: policy.rollout.env_address must be the headless env Service env-pods (every env pod)")
            (pods,) = [s for s in manifests.of_kind("Service") if s["metadata"]["name"] == "env-pods"]
            assert pods["spec"]["clusterIP"] == "None" and pods["spec"]["selector"] == {"app": "env"}, pods
            env_config, _, _ = _role_config(manifests, "env")
            assert env_config.env.advertise_address == f"10.0.0.10:{env_grpc}", (
                f"{where}: each env pod must advertise its own address (POD_IP) for the session ids it opens")


def _secret_of(manifests: Manifests, key: str) -> str:
    (secret,) = [s["metadata"]["name"] for s in manifests.of_kind("Secret") if key in s.get("data", {})]
    return secret


def _run_yaml(manifests: Manifests, deployment: dict[str, Any]) -> str:
    container = main_container(deployment)
    name, key = _mounted_file(manifests, deployment, container, parse_service_command(container).config_path)
    return manifests.configmap_data(name)[key]


@pytest.mark.parametrize("overlay", ALL)
def test_nats_config_agrees_with_its_statefulset_and_service(overlay: str) -> None:
    manifests = render(overlay)
    nats = manifests.get("StatefulSet", "nats")
    container = main_container(nats)
    args = container["args"]
    assert args[:1] == ["--config"], args
    cm_name, key = _mounted_file(manifests, nats, container, args[1])
    conf = manifests.configmap_data(cm_name)[key]
    outside_cluster = re.sub(r"^cluster\s*\{.*?^\}", "", conf, flags=re.M | re.S)  # its port is the routes' (ha)
    setting = {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\w+):\s*(\S+)", outside_cluster, re.M)}
    ports = named_ports(container)
    assert int(setting["port"]) == ports["client"] == 4222
    assert int(setting["http_port"]) == ports["monitor"]
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[kind]["httpGet"]["port"] == ports["monitor"], kind
    assert re.search(r"^jetstream\s*\{", conf, re.M), "JetStream must be enabled"
    assert setting.get("sync_interval") == "always", "JetStream must fsync before acknowledging (power loss)"
    data_mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}["data"]
    assert setting["store_dir"] == data_mount, "JetStream store_dir must be the persistent volume"
    assert [t["metadata"]["name"] for t in nats["spec"]["volumeClaimTemplates"]] == ["data"]
    assert setting["user"] == "$NATS_USER" and setting["password"] == "$NATS_PASSWORD"
    env = container_env(manifests, nats, container)
    auth = manifests.secret_data(_secret_of(manifests, "NATS_PASSWORD"))
    assert (env["NATS_USER"], env["NATS_PASSWORD"]) == (auth["NATS_USER"], auth["NATS_PASSWORD"])
    assert re.fullmatch(r"[A-Za-z0-9._~-]{16,}", auth["NATS_PASSWORD"]), "password must be URL-safe (it goes into nats.url)"
    service = manifests.get("Service", "nats")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"client": ports["client"], "monitor": ports["monitor"]}
    headless = manifests.get("Service", nats["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    # One message limit: the server accepts what every service may send (field bugs, 7).
    number, unit = re.fullmatch(r"(\d+)([KMG]B)?", setting["max_payload"]).groups()
    max_payload = int(number) * {None: 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}[unit]
    for name in roles_of(overlay):
        config, _, _ = _role_config(manifests, name)
        assert config.limits.max_message_bytes <= max_payload, (
            f"{name}: limits.max_message_bytes={config.limits.max_message_bytes} over nats.conf max_payload {max_payload}")


# ---- pod hardening and resources ---------------------------------------------------------------


@pytest.mark.parametrize("overlay", ALL)
def test_every_container_is_probed_sized_and_locked_down(overlay: str) -> None:
    manifests = render(overlay)
    problems = []
    for workload in [*manifests.workloads(), *manifests.of_kind("Job")]:
        spec = pod_spec(workload)
        pod_sc = spec.get("securityContext", {})
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in all_containers(workload):
            where = f"{workload['metadata']['name']}/{c['name']}"
            sc = {**pod_sc, **c.get("securityContext", {})}
            # Probes belong to long-running containers: an init container or a Job's container
            # runs to completion (Kubernetes rejects probes on init containers).
            long_running = workload["kind"] != "Job" and c in spec["containers"]
            for probe in ("readinessProbe", "livenessProbe"):
                if long_running and probe not in c:
                    problems.append(f"{where}: no {probe}")
            resources = c.get("resources", {})
            for kind in ("requests", "limits"):
                for res in ("cpu", "memory"):
                    if res not in resources.get(kind, {}):
                        problems.append(f"{where}: no {kind}.{res}")
            for res, limit in resources.get("limits", {}).items():
                request = resources.get("requests", {}).get(res, limit)
                if _quantity(request) > _quantity(limit):
                    problems.append(f"{where}: {res} request {request} > limit {limit}")
            expected = {"runAsNonRoot": True, "runAsUser": 10001, "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False}
            if overlay in SANDBOX_OVERLAYS and workload["metadata"]["name"] in SANDBOX_ROLES:  # the sandbox needs
                expected.update(runAsNonRoot=False, runAsUser=0, allowPrivilegeEscalation=True)  # root (pod_security)
            for key, value in expected.items():
                if sc.get(key) != value:
                    problems.append(f"{where}: securityContext.{key} is {sc.get(key)!r}, expected {value!r}")
            if sc.get("capabilities", {}).get("drop") != ["ALL"]:
                problems.append(f"{where}: capabilities must drop ALL")
            if sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
                problems.append(f"{where}: seccompProfile must be RuntimeDefault")
            if sc.get("privileged"):
                problems.append(f"{where}: privileged")
            tmp = [m for m in c.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
            if not tmp or "emptyDir" not in volumes[tmp[0]["name"]]:
                problems.append(f"{where}: /tmp must be an emptyDir (the root filesystem is read-only)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("overlay", GPU_OVERLAYS)
def test_gpu_requests_only_on_policy_and_reward_pods(overlay: str) -> None:
    manifests = render(overlay)
    with_gpu = {w["metadata"]["name"] for w in manifests.workloads() if _gpus(w)}
    expected = GPU_ROLES - ({"reward-judge"} if overlay == "openai-judge" else set())
    expected |= {"reward-judge-shadow"} if overlay == "shadow-judge" else set()
    assert with_gpu == expected, f"{overlay}: GPU pods {sorted(with_gpu)}, expected {sorted(expected)}"
    for name in with_gpu:
        workload = manifests.workload(name)
        if name in SHARDED.get(overlay, set()):  # P GPUs per rank pod, one torchrun process each
            per_pod = int(parse_service_command(main_container(workload)).torchrun["nproc-per-node"])
            assert _gpus(workload) == [(per_pod, per_pod)], f"{name}: nvidia.com/gpu must be --nproc-per-node"
        else:
            assert _gpus(workload) == [(1, 1)], f"{name}: nvidia.com/gpu requests and limits must both be 1"
        tolerations = pod_spec(workload).get("tolerations", [])
        assert any(t.get("key") == "nvidia.com/gpu" for t in tolerations), f"{name}: tolerate the GPU node taint"


def test_cpu_overlay_requests_no_gpu() -> None:
    manifests = render("cpu")
    assert not [w["metadata"]["name"] for w in manifests.workloads() if _gpus(w)]
    assert "nvidia.com/gpu" not in str(manifests.objects)


@pytest.mark.parametrize("overlay", ALL)
def test_replicas_trainers_are_single_and_workers_scale(overlay: str) -> None:
    manifests = render(overlay)
    for name in SINGLETONS:
        if name in SHARDED.get(overlay, set()):
            spec = manifests.get("StatefulSet", name)["spec"]
            nnodes = parse_service_command(main_container(manifests.workload(name))).torchrun["nnodes"]
            assert spec.get("replicas") == int(nnodes) >= 2, f"{name}: replicas must be torchrun's --nnodes"
            assert spec.get("podManagementPolicy") == "Parallel", f"{name}: all ranks start together"
            assert spec.get("updateStrategy") == {"type": "OnDelete"}, f"{name}: no rolling update across ranks"
            continue
        spec = manifests.deployment(name)["spec"]
        assert spec.get("replicas") == 1, f"{name}: exactly one replica"
        assert spec.get("strategy", {}).get("type") == "Recreate", f"{name}: never two at once during an update"
    for name in SCALABLE:
        assert "replicas" not in manifests.deployment(name)["spec"], (
            f"{name}: leave replicas unset so `kubectl apply` does not reset kubectl scale / KEDA")


@pytest.mark.parametrize("overlay", ALL)
def test_checkpoints_volume_is_shared_by_policy_and_reward_pods(overlay: str) -> None:
    manifests = render(overlay)
    pvc = manifests.get("PersistentVolumeClaim", "checkpoints")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    mounted = {}
    for workload in manifests.workloads():
        volumes = {v["name"]: v for v in pod_spec(workload).get("volumes", [])}
        for c in all_containers(workload):
            for m in c.get("volumeMounts", []):
                claim = volumes.get(m["name"], {}).get("persistentVolumeClaim", {}).get("claimName")
                if claim == "checkpoints":
                    assert m["mountPath"] == "/checkpoints"
                    mounted[workload["metadata"]["name"]] = bool(m.get("readOnly"))
    shadow = {"reward-judge-shadow": True} if overlay == "shadow-judge" else {}
    assert mounted == {"policy-rollout": True, "reward-judge": True, "policy-trainer": False, "reward-trainer": False,
                       **shadow}


@pytest.mark.parametrize("overlay", ALL)
def test_images_are_set_in_one_place(overlay: str) -> None:
    manifests = render(overlay)
    images = {}
    for workload in manifests.workloads():
        for c in all_containers(workload):
            image = c["image"]
            assert re.fullmatch(r"[\w.-]+(/[\w.-]+)*:[\w.-]+", image) and not image.endswith(":latest"), (
                f"{workload['metadata']['name']}: image {image!r} needs a registry name and a pinned tag "
                "(a placeholder left over means components/images lacks an entry)")
            images[workload["metadata"]["name"]] = image
    flavour = {name: "cpu" if "rlanything-cpu" in image else "gpu" if "rlanything-gpu" in image else "other"
               for name, image in images.items()}
    expected_model = "cpu" if overlay == "cpu" else "gpu"
    users = {"user-env": "other"} if overlay == "remote-env" else {"critic": "other"} if overlay == "custom-critic" else {}
    shadow = {"reward-judge-shadow": "gpu"} if overlay == "shadow-judge" else {}
    assert flavour == {"nats": "other", "env": "cpu", "critic": "cpu", "ingest": "cpu",
                       **{name: expected_model for name in GPU_ROLES}, **users, **shadow}, flavour
    tags = {image.rpartition(":")[2] for name, image in images.items() if flavour[name] != "other"}
    assert len(tags) == 1, f"one release tag for every service image, got {tags}"


# ---- autoscaling and the role swap example ----------------------------------------------------


def test_scaled_objects_watch_the_consumer_lag_of_existing_deployments() -> None:
    manifests = render("autoscale")
    scaled = {o["metadata"]["name"]: o for o in manifests.objects if o["kind"] == "ScaledObject"}
    assert set(scaled) == set(SCALERS)
    deployments = {d["metadata"]["name"] for d in manifests.of_kind("Deployment")}
    monitor_port = {p["name"]: p["port"] for p in manifests.get("Service", "nats")["spec"]["ports"]}["monitor"]
    for name, obj in scaled.items():
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        spec = obj["spec"]
        target = spec["scaleTargetRef"]
        assert target.get("kind", "Deployment") == "Deployment" and target["name"] in deployments
        assert target["name"] == name
        assert "replicas" not in manifests.deployment(name)["spec"]
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
        # a scaler error holds a known size instead of an arbitrary one (KEDA fallback)
        assert spec["fallback"]["failureThreshold"] >= 1
        assert spec["minReplicaCount"] <= spec["fallback"]["replicas"] <= spec["maxReplicaCount"]
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "nats-jetstream"
        meta = trigger["metadata"]
        assert (meta["stream"], meta["consumer"]) == SCALERS[name]
        assert meta["natsServerMonitoringEndpoint"] == f"nats.{NAMESPACE}.svc:{monitor_port}"
        assert meta["account"] == "$G", "one user without accounts: the global account"
        assert all(isinstance(v, str) for v in meta.values()), "KEDA trigger metadata values are strings"
        assert int(meta["lagThreshold"]) > 0


@pytest.mark.parametrize("deployment", sorted(SCALERS))
def test_scaled_consumers_are_the_ones_the_service_code_creates(deployment: str) -> None:
    """KEDA scales on a durable consumer by name: a rename in the code must fail here, not silently."""
    from services.common.topology import CONSUMERS

    stream, durable = SCALERS[deployment]
    module = ROLES[deployment][0]
    # the services bind their consumers from the topology table (tests/unit/test_topology.py checks
    # that each service's consumers are exactly the table's), so the table says what the code creates
    consumers = [(c.stream, c.durable) for c in CONSUMERS if c.service == module]
    assert consumers, f"the topology table lists no consumer of services/{module}"
    assert (stream, durable) in consumers, f"services/{module} consumes {consumers}, KEDA watches {(stream, durable)}"


def test_openai_judge_overlay_changes_only_the_judge() -> None:
    default, swapped = render("default"), render("openai-judge")
    for name in set(ROLES) - {"reward-judge"}:
        assert _strip_hash(swapped.deployment(name)) == _strip_hash(default.deployment(name)), name
    command = parse_service_command(main_container(swapped.deployment("reward-judge")))
    assert command.overrides[:2] == ["reward.role=judge", "nats.url=nats://nats:4222"]
    config, _, env = _role_config(swapped, "reward-judge")
    assert config.reward.backend == "openai" and config.reward.role == "judge"
    url = urlsplit(config.reward.model.openai_base_url)
    assert (url.hostname, url.port) == ("llm-judge.llm.svc", 8000)
    key_env = config.reward.model.openai_api_key_env
    (key_var,) = [e for e in main_container(swapped.deployment("reward-judge"))["env"] if e["name"] == key_env]
    assert key_var["valueFrom"]["secretKeyRef"]["name"] == "openai-judge"
    policies = {p["metadata"]["name"] for p in swapped.of_kind("NetworkPolicy")}
    assert policies - {p["metadata"]["name"] for p in default.of_kind("NetworkPolicy")} == {"reward-judge-openai"}


def _changed_deployments(overlay: str) -> set[str]:
    default, swapped = render("default"), render(overlay)
    return {name for name in ROLES if _strip_hash(swapped.deployment(name)) != _strip_hash(default.deployment(name))}


def test_the_shadow_judge_overlay_adds_a_judge_in_shadow_mode_and_changes_nothing_else() -> None:
    assert _changed_deployments("shadow-judge") == set()
    manifests = render("shadow-judge")
    config, _, _ = _role_config(manifests, "reward-judge-shadow")
    assert (config.reward.role, config.reward.shadow, config.reward.backend) == ("judge", "next", "llm")
    assert config.reward.model.source.startswith("/checkpoints/")
    running, _, _ = _role_config(manifests, "reward-judge")
    assert running.reward.shadow == ""  # the running judge is the default's
    pod = manifests.deployment("reward-judge-shadow")["spec"]["template"]["metadata"]["labels"]
    (policy,) = [p for p in manifests.of_kind("NetworkPolicy") if p["metadata"]["name"] == "reward-judge-shadow"]
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app": pod["app"]} == {"app": "reward-judge-shadow"}


def test_the_remote_env_overlay_points_the_env_at_the_users_server() -> None:
    assert _changed_deployments("remote-env") == {"env"}
    manifests = render("remote-env")
    config, _, _ = _role_config(manifests, "env")
    (family,) = config.env.families
    host, _, port = family.address.rpartition(":")
    service_ports = {p["name"]: p["port"] for p in manifests.get("Service", host)["spec"]["ports"]}
    assert family.type == "remote" and int(port) == service_ports["grpc"]
    egress = [p for p in manifests.of_kind("NetworkPolicy") if p["spec"]["podSelector"].get("matchLabels") == {"app": "env"}
              and any(t.get("podSelector", {}).get("matchLabels") == {"app": host}
                      for rule in p["spec"].get("egress", []) for t in rule["to"])]
    assert egress, "the env pods may not reach the user's server"


def test_the_vllm_policy_overlay_swaps_only_the_rollout_backend() -> None:
    assert _changed_deployments("vllm-policy") == {"policy-rollout"}
    config, _, _ = _role_config(render("vllm-policy"), "policy-rollout")
    assert config.policy.model.backend == "vllm" and config.policy.role == "rollout"


def test_the_custom_critic_overlay_swaps_only_the_critics_image() -> None:
    assert _changed_deployments("custom-critic") == {"critic"}
    default, swapped = render("default").deployment("critic"), render("custom-critic").deployment("critic")
    assert main_container(swapped)["image"] != main_container(default)["image"]
    main_container(swapped)["image"] = main_container(default)["image"]
    assert _strip_hash(swapped) == _strip_hash(default)


def _strip_hash(obj: Any) -> Any:
    """Drop kustomize's name hashes (ConfigMap/Secret suffixes) so two renders compare."""
    if isinstance(obj, dict):
        return {k: _strip_hash(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strip_hash(v) for v in obj]
    if isinstance(obj, str):
        return re.sub(r"^(rlanything-config|nats-config|nats-auth)-[a-z0-9]{10}$", r"\1", obj)
    return obj


@pytest.mark.parametrize("overlay", ALL)
def test_the_bootstrap_job_writes_the_models_the_pods_wait_for_and_load(overlay: str) -> None:
    manifests = render(overlay)
    job = manifests.get("Job", "model-bootstrap")
    container = main_container(job)
    command = [*container["command"], *container["args"]]
    assert command[:3] == ["python", "-m", "services.offline.bootstrap"], command
    out = command[command.index("--out") + 1]
    writable = [m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")]
    assert any(PurePosixPath(out).is_relative_to(m) for m in writable), f"--out {out} is not a writable volume"
    for name, (module, _) in ROLES.items():
        if module not in ("policy", "reward"):
            continue
        deployment = manifests.workload(name)
        (init,) = pod_spec(deployment)["initContainers"]
        assert f"[ -f {out}/READY ]" in " ".join(init["command"]), f"{name}: its init container must wait for {out}/READY"
        config, _, _ = _role_config(manifests, name)
        if module == "reward" and config.reward.backend != "llm":
            continue  # an external judge loads no weights
        source = getattr(config, module).model.source
        assert source == f"{out}/{'policy' if module == 'policy' else 'judge'}", f"{name}: model.source {source!r}"
