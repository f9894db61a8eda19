"""The Kubernetes Pod Security Standards, "baseline" and "restricted" levels, as a pure check.

Every control of https://kubernetes.io/docs/concepts/security/pod-security-standards/ (version
latest) is one rule here, in the standard's order, on a pod spec (and its pod annotations).
"""

from __future__ import annotations

from typing import Any

__all__ = ["restricted_violations"]

ALLOWED_VOLUME_TYPES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                        "projected", "secret"}
"""Restricted: the only volume types a pod may use."""
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                         "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SELINUX_TYPES = {None, "", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def restricted_violations(spec: dict[str, Any], annotations: dict[str, str] | None = None,
                          where: str = "pod") -> list[str]:
    """What in pod ``spec`` breaks the restricted standard (which includes baseline); empty: none."""
    out: list[str] = []
    pod_sc = spec.get("securityContext", {}) or {}
    containers = [*spec.get("initContainers", []), *spec.get("containers", []), *spec.get("ephemeralContainers", [])]
    # -- baseline --
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess"):
        out.append(f"{where}: securityContext.windowsOptions.hostProcess")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(f"{where}: {key}")
    for v in spec.get("volumes", []):
        if "hostPath" in v:
            out.append(f"{where}: hostPath volume {v['name']}")
        kinds = set(v) - {"name"}
        if not kinds <= ALLOWED_VOLUME_TYPES:
            out.append(f"{where}: volume {v['name']} of type {sorted(kinds - ALLOWED_VOLUME_TYPES)}")
    for key, value in (annotations or {}).items():
        apparmor = key.startswith("container.apparmor.security.beta.kubernetes.io/")
        if apparmor and value != "runtime/default" and not value.startswith("localhost/"):
            out.append(f"{where}: AppArmor annotation {key}={value}")
    for sysctl in pod_sc.get("sysctls", []) or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            out.append(f"{where}: sysctl {sysctl.get('name')}")
    out += _selinux(pod_sc, where)
    out += _apparmor(pod_sc, where)
    if (pod_sc.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append(f"{where}: pod seccompProfile Unconfined")
    # -- restricted, pod level --
    if pod_sc.get("runAsUser") == 0:
        out.append(f"{where}: pod runAsUser 0")
    for c in containers:
        name = f"{where}/{c['name']}"
        sc = c.get("securityContext", {}) or {}
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"{name}: windowsOptions.hostProcess")
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        added = set((sc.get("capabilities") or {}).get("add", []) or [])
        if not added <= BASELINE_CAPABILITIES:
            out.append(f"{name}: adds capabilities {sorted(added - BASELINE_CAPABILITIES)}")
        for port in c.get("ports", []):
            if port.get("hostPort"):
                out.append(f"{name}: hostPort {port['hostPort']}")
        out += _selinux(sc, name) + _apparmor(sc, name)
        if sc.get("procMount", "Default") != "Default":
            out.append(f"{name}: procMount {sc['procMount']}")
        # -- restricted --
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation must be false")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            out.append(f"{name}: runAsNonRoot must be true (container or pod)")
        if sc.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost, got {seccomp!r}")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities must drop ALL")
        if not set(caps.get("add") or []) <= {"NET_BIND_SERVICE"}:
            out.append(f"{name}: may add only NET_BIND_SERVICE, adds {caps.get('add')}")
    return out


def _selinux(sc: dict[str, Any], where: str) -> list[str]:
    opts = sc.get("seLinuxOptions") or {}
    out = []
    if opts.get("type") not in SELINUX_TYPES:
        out.append(f"{where}: seLinuxOptions.type {opts.get('type')}")
    for key in ("user", "role"):
        if opts.get(key):
            out.append(f"{where}: seLinuxOptions.{key} set")
    return out


def _apparmor(sc: dict[str, Any], where: str) -> list[str]:
    profile = (sc.get("appArmorProfile") or {}).get("type")
    return [f"{where}: appArmorProfile {profile}"] if profile not in (None, "RuntimeDefault", "Localhost") else []
