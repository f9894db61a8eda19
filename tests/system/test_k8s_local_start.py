"""The services start exactly as the manifests start them, and report SERVING.

Each container of the rendered default kustomization runs here as a local process with the
same command, arguments and environment, resolved the way the kubelet resolves them (Secret
references, `$(VAR)` expansion). Only what a pod gets from the cluster is mapped to this
machine: every volume becomes a temporary directory (the mounted ConfigMaps and Secrets are
written into it), every Service address (`nats:4222`, `env:50051`) becomes a loopback port,
`python` is this virtualenv's interpreter, and where this machine has no CUDA device the GPU
a pod would get becomes the CPU (`model.device: cuda` -> `cpu` in the pod's copy of run.yaml).
NATS itself starts from its StatefulSet too (its nats.conf, its credentials), so the services
authenticate exactly as in the cluster.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from services.common.config import SERVICE_NAMES
from services.common.grpc_runtime import check_health_sync
from services.common.nats_server import find_nats_server, free_port
from services.common.parent_watch import child_env
from tests.k8s.kube import (
    ROLES,
    ROOT,
    Manifests,
    container_env,
    expand_vars,
    main_container,
    named_ports,
    pod_spec,
    remap_url,
    render,
)

pytestmark = [pytest.mark.system, pytest.mark.slow]

OVERLAY = "default"
"""The kustomization whose commands are run (switch to "cpu" if the default ever needs a GPU-only
backend such as vllm, which cannot start here)."""

START_TIMEOUT_S = 90.0
"""Seconds every pod gets to report SERVING (they load the bootstrap Job's models)."""
BOOTSTRAP_TIMEOUT_S = 180.0
"""Seconds the bootstrap Job gets to build the tiny policy and judge (about 15 s on 2 idle cores)."""


class LocalPod:
    """One workload's container run as a local process, as the kubelet would run it."""

    def __init__(self, manifests: Manifests, workload: dict[str, Any], root: Path,
                 addresses: dict[tuple[str, int], tuple[str, int]], local_ports: dict[str, int],
                 container: dict[str, Any] | None = None) -> None:
        self.name = workload["metadata"]["name"] + (f"-{container['name']}" if container else "")
        self.workload = workload
        self.container = container or main_container(workload)
        self.local_ports = local_ports
        self.addresses = addresses
        self.dir = root / workload["metadata"]["name"]
        self.log_path = root / f"{self.name}.log"
        self.mounts = self._materialize_volumes(manifests, root)
        self.env = {k: self._remap(v) for k, v in container_env(manifests, workload, self.container).items()}
        self.devices_mapped: list[str] = []
        self.argv = self._argv()
        self.proc: subprocess.Popen[bytes] | None = None

    # -- what the kubelet would do, mapped to this machine --

    def _materialize_volumes(self, manifests: Manifests, root: Path) -> dict[str, Path]:
        volumes = {v["name"]: v for v in pod_spec(self.workload).get("volumes", [])}
        mounts: dict[str, Path] = {}
        for mount in self.container.get("volumeMounts", []):
            source = volumes.get(mount["name"], {"volumeClaimTemplate": {}})
            if "persistentVolumeClaim" in source:  # shared between pods, like the real claim
                local = root / "pvc" / source["persistentVolumeClaim"]["claimName"]
            else:
                local = self.dir / mount["name"]
            local.mkdir(parents=True, exist_ok=True)
            if "configMap" in source:
                for key, text in manifests.configmap_data(source["configMap"]["name"]).items():
                    (local / key).write_text(text)
            elif "secret" in source:
                for key, text in manifests.secret_data(source["secret"]["secretName"]).items():
                    (local / key).write_text(text)
            mounts[mount["mountPath"]] = local
        # Longest mount path first, so /cache/huggingface maps before /cache.
        return dict(sorted(mounts.items(), key=lambda item: -len(item[0])))

    def _remap(self, value: str) -> str:
        """Map an in-pod path or an in-cluster address in ``value`` to its local counterpart."""
        for mount_path, local in self.mounts.items():
            if value == mount_path or value.startswith(mount_path + "/"):
                return str(local) + value[len(mount_path):]
        if "://" in value:
            return remap_url(value, self.addresses)
        m = re.fullmatch(r"([\w.-]+):(\d+)", value)
        if m and (m.group(1), int(m.group(2))) in self.addresses:
            host, port = self.addresses[(m.group(1), int(m.group(2)))]
            return f"{host}:{port}"
        return value

    def _argv(self) -> list[str]:
        raw = [expand_vars(a, self.env) for a in [*self.container.get("command", []), *self.container.get("args", [])]]
        if self.name == "nats":
            # nats-server reads its ports from nats.conf; the flags put them on free loopback ports.
            config = self._local_file(raw[raw.index("--config") + 1])
            config.write_text(self._remap_paths_in_text(config.read_text()))
            return [find_nats_server(), "--config", str(config), "-a", "127.0.0.1",
                    "-p", str(self.local_ports["client"]), "-m", str(self.local_ports["monitor"])]
        if raw[:2] == ["sh", "-c"]:  # a shell step (an init container): its in-pod paths mapped
            return ["sh", "-c", self._remap_paths_in_text(raw[2])]
        assert raw[:2] == ["python", "-m"], raw
        argv = [sys.executable, "-m", raw[2]]
        module = raw[2].removeprefix("services.")
        rest = raw[3:]
        for flag, value in zip(rest[::2], rest[1::2]):
            if flag == "--config":
                config = self._local_file(value)
                self._rewrite_run_config(config, module)
                argv += [flag, str(config)]
            elif "=" in value:
                key, _, v = value.partition("=")
                argv += [flag, f"{key}={self._remap(v)}"]
            else:
                argv += [flag, self._remap(value)]
        return argv

    def _local_file(self, pod_path: str) -> Path:
        local = Path(self._remap(pod_path))
        assert local != Path(pod_path) and local.is_file(), f"{self.name}: {pod_path} is not in a mounted volume"
        return local

    def _remap_paths_in_text(self, text: str) -> str:
        """Every in-pod mount path in ``text`` mapped in one pass (a mapped path is not mapped again)."""
        if not self.mounts:
            return text
        alternatives = "|".join(re.escape(m) for m in self.mounts)  # longest first (see _materialize_volumes)
        pattern = rf"(?<![\w/.])({alternatives})(?=[/\s\"'\]]|$)"
        return re.sub(pattern, lambda m: str(self.mounts[m.group(1)]), text, flags=re.M)

    def _rewrite_run_config(self, path: Path, module: str) -> None:
        """This pod's copy of run.yaml: its own ports on loopback, local paths and addresses."""

        def walk(node: Any) -> Any:
            if isinstance(node, dict):
                return {k: walk(v) for k, v in node.items()}
            if isinstance(node, list):
                return [walk(v) for v in node]
            return self._remap(node) if isinstance(node, str) else node

        data = walk(yaml.safe_load(path.read_text()))
        if module not in SERVICE_NAMES:  # a one-shot job: no ports, CPU only
            for name in ("policy", "reward"):
                model = data.get(name, {}).get("model") or {}
                if model.get("device", "").startswith("cuda") and not _cuda_available():
                    model["device"] = "cpu"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            return
        section = data.setdefault(module, {})
        section.setdefault("server", {})["host"] = "127.0.0.1"
        # Every port of this service that is one of the container's ports moves to its loopback port.
        local_by_container_port = {named_ports(self.container)[n]: p for n, p in self.local_ports.items()}
        for node in (section, section["server"]):
            for key, value in node.items():
                if key.endswith("port") and value in local_by_container_port:
                    node[key] = local_by_container_port[value]
        assert section["server"].get("grpc_port") == self.local_ports["grpc"], "server.grpc_port is not the grpc containerPort"
        model = section.get("model") or {}
        if model.get("device", "").startswith("cuda") and not _cuda_available():
            model["device"] = "cpu"
            self.devices_mapped.append(f"{module}.model.device")
        path.write_text(yaml.safe_dump(data, sort_keys=False))

    # -- process control --

    def start(self) -> "LocalPod":
        env = child_env({**os.environ, **self.env})  # it ends with the test process (`parent_watch`)
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                     stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self

    def ready(self) -> bool:
        """The container's readiness probe, pointed at the local port."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
        probe = self.container["readinessProbe"]
        if "grpc" in probe:
            return check_health_sync(f"127.0.0.1:{self.local_ports['grpc']}", probe["grpc"].get("service", "")) == "SERVING"
        path = probe["httpGet"]["path"]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.local_ports['monitor']}{path}", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def run_to_completion(self, timeout_s: float) -> None:
        """A Job's or an init container's run: it must exit 0 within ``timeout_s``."""
        self.start()
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not finish within {timeout_s} s:\n{self.log()}") from None
        assert code == 0, f"{self.name} exited with {code}:\n{self.log()}"

    def send_sigterm(self) -> None:
        """What the kubelet does first when the pod is deleted."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_exit(self) -> int:
        """Wait at most the pod's terminationGracePeriodSeconds after SIGTERM; the exit code."""
        assert self.proc is not None
        grace = pod_spec(self.workload).get("terminationGracePeriodSeconds", 30)
        try:
            return self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.name} did not stop within {grace} s of SIGTERM:\n{self.log()}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _local_ports(workload: dict[str, Any]) -> dict[str, int]:
    return {name: free_port() for name in named_ports(main_container(workload))}


def _service_addresses(manifests: Manifests, ports_by_workload: dict[str, dict[str, int]]) -> dict[tuple[str, int], tuple[str, int]]:
    """(Service name, port) -> the loopback address of the pod behind it."""
    addresses = {}
    for service in manifests.of_kind("Service"):
        name = service["metadata"]["name"]
        selector = service["spec"]["selector"]
        (workload,) = [w for w in manifests.workloads()
                       if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        container_names = {p: n for n, p in named_ports(main_container(workload)).items()}
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            port_name = target if isinstance(target, str) else container_names[target]
            local = ("127.0.0.1", ports_by_workload[workload["metadata"]["name"]][port_name])
            addresses[(name, port["port"])] = local
            addresses[(f"{name}.{service['metadata']['namespace']}.svc", port["port"])] = local
    return addresses


def _http_get(url: str, timeout_s: float = 10.0) -> bytes:
    """GET ``url`` until it answers 200 (the body), or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _wait_ready(pods: list[LocalPod], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(pods)
    while pending:
        pending = [p for p in pending if not p.ready()]
        if pending and time.monotonic() > deadline:
            raise AssertionError(f"not ready after {timeout_s} s: {[p.name for p in pending]}\n"
                                 + "\n".join(f"--- {p.name}\n{p.log()}" for p in pending))
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Manifests, dict, LocalPod]]:
    """The rendered manifests, the loopback address map, and NATS started from its StatefulSet."""
    manifests = render(OVERLAY)
    root = tmp_path_factory.mktemp("k8s-local")
    ports = {w["metadata"]["name"]: _local_ports(w) for w in manifests.workloads()}
    addresses = _service_addresses(manifests, ports)
    nats = LocalPod(manifests, manifests.get("StatefulSet", "nats"), root, addresses, ports["nats"]).start()
    try:
        _wait_ready([nats], 15)
        yield manifests, {"root": root, "ports": ports, "addresses": addresses}, nats
    finally:
        nats.kill()


def test_nats_starts_from_its_manifest_and_requires_the_secret_credentials(cluster) -> None:
    import asyncio

    import nats as nats_client

    manifests, local, nats = cluster
    auth = nats.env
    host, port = local["addresses"][("nats", 4222)]

    async def connect(userinfo: str) -> str:
        try:
            nc = await asyncio.wait_for(nats_client.connect(f"nats://{userinfo}{host}:{port}", allow_reconnect=False,
                                                            connect_timeout=2), 5)
        except Exception as exc:  # noqa: BLE001 - the error text is the result
            return f"refused: {exc}"
        try:
            info = await nc.jetstream().account_info()
            return f"ok: jetstream limits {info.limits.max_storage}"
        finally:
            await nc.close()

    assert (asyncio.run(connect(f"{auth['NATS_USER']}:{auth['NATS_PASSWORD']}@"))).startswith("ok: jetstream")
    assert "Authorization Violation" in asyncio.run(connect(""))
    assert "Authorization Violation" in asyncio.run(connect(f"{auth['NATS_USER']}:wrong@"))


def test_services_start_as_the_manifests_start_them_and_report_serving(cluster) -> None:
    manifests, local, _ = cluster
    # The bootstrap Job first: it writes the starting models the policy and reward pods load.
    job = manifests.get("Job", "model-bootstrap")
    LocalPod(manifests, job, local["root"], local["addresses"], {}).run_to_completion(BOOTSTRAP_TIMEOUT_S)
    pods = [LocalPod(manifests, manifests.deployment(name), local["root"], local["addresses"], local["ports"][name])
            for name in ROLES]
    for pod in pods:  # init containers (waiting for the Job's READY file) run before the pod starts
        for init in pod_spec(pod.workload).get("initContainers", []):
            LocalPod(manifests, pod.workload, local["root"], local["addresses"], {}, init).run_to_completion(10)
    try:
        for pod in pods:
            pod.start()
        _wait_ready(pods, START_TIMEOUT_S)
        for pod in pods:
            assert b"# TYPE" in _http_get(f"http://127.0.0.1:{pod.local_ports['metrics']}/metrics"), f"{pod.name}: /metrics"
            if "http" in pod.local_ports and pod.name == "policy-rollout":  # the OpenAI-compatible endpoint
                assert b'"data"' in _http_get(f"http://127.0.0.1:{pod.local_ports['http']}/v1/models"), pod.name
            if pod.name == "ingest":  # the ingest API knows the tenant whose key the Secret holds
                base = f"http://127.0.0.1:{pod.local_ports['http']}"
                assert b"ok" in _http_get(f"{base}/healthz")
                (key,) = [v for s in manifests.of_kind("Secret") for k, v in s.get("data", {}).items()
                          if k == "INGEST_KEY_EXAMPLE"]
                import base64
                request = urllib.request.Request(f"{base}/v1/ingest/episodes/none", headers={
                    "Authorization": f"Bearer {base64.b64decode(key).decode()}"})
                with pytest.raises(urllib.error.HTTPError) as err:
                    urllib.request.urlopen(request, timeout=5)
                assert err.value.code == 404  # authenticated as tenant "example"; no such episode
            for kind in ("livenessProbe", "startupProbe"):
                probe = pod.container[kind]["grpc"]
                status = check_health_sync(f"127.0.0.1:{pod.local_ports['grpc']}", probe.get("service", ""))
                assert status == "SERVING", f"{pod.name}: {kind} would see {status}"
        for pod in pods:  # no pod built a model of its own: they serve what the Job wrote
            built = sorted(p.name for p in (pod.mounts["/cache"] / "models").glob("tiny-*")) if "/cache" in pod.mounts else []
            assert built == [], f"{pod.name} built {built} in-process"
        for pod in pods:
            pod.send_sigterm()
        codes = {pod.name: pod.wait_exit() for pod in pods}
        assert codes == {name: 0 for name in ROLES}, codes
    finally:
        for pod in pods:
            pod.kill()


def test_the_local_argv_is_the_manifest_argv(cluster) -> None:
    """What the test runs differs from the manifest only by the mapped paths and addresses."""
    manifests, local, _ = cluster
    for name in ROLES:
        pod = LocalPod(manifests, manifests.deployment(name), local["root"], local["addresses"], local["ports"][name])
        manifest_argv = [*pod.container["command"], *pod.container["args"]]
        assert len(pod.argv) == len(manifest_argv), (pod.argv, manifest_argv)
        assert pod.argv[0] == sys.executable and manifest_argv[0] == "python"
        assert pod.argv[1:3] == manifest_argv[1:3]  # -m services.<name>
        assert pod.argv[3::2] == manifest_argv[3::2]  # the same flags in the same order
        for ours, theirs in zip(pod.argv[4::2], manifest_argv[4::2]):
            if theirs.startswith("/"):  # a path in a volume
                assert ours.startswith(str(local["root"])), (ours, theirs)
            else:  # the same key, its value with addresses and variables resolved
                assert ours.partition("=")[0] == theirs.partition("=")[0], (ours, theirs)
                if "$(" not in theirs and "://" not in theirs:
                    assert ours == theirs
        url = urlsplit([a for a in pod.argv if a.startswith("nats.url=")][0].partition("=")[2])
        assert (url.hostname, url.port) == local["addresses"][("nats", 4222)]
        assert url.username is None and {"NATS_USER", "NATS_PASSWORD"} <= set(pod.env)  # credentials: environment
        socket.getaddrinfo(url.hostname, url.port)  # a real local address
