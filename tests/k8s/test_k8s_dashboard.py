"""The Grafana dashboard (k8s/components/monitoring) queries only metrics the services export,
and its PodMonitor scrapes the port every service serves /metrics on."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re

import pytest
from prometheus_client import REGISTRY

import services
from tests.k8s.kube import K8S_DIR, render

DASHBOARD = K8S_DIR / "components" / "monitoring" / "rlanything-dashboard.json"
NEEDS_EXTRAS = ("vllm_engine", "vllm_worker")  # import vLLM: not installed by make test


def exported_names() -> set[str]:
    """Every sample name a service process can export (each module imported, as a service would)."""
    for info in pkgutil.walk_packages(services.__path__, "services."):
        if info.name.rsplit(".", 1)[-1] in NEEDS_EXTRAS or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    return {name for name in REGISTRY._names_to_collectors if name.startswith("rla_")}  # noqa: SLF001


def queried(dashboard: dict) -> dict[str, set[str]]:
    """Panel title → the rla_* series its queries read."""
    return {p["title"]: {m for t in p["targets"] for m in re.findall(r"\brla_[a-z0-9_]+", t["expr"])}
            for p in dashboard["panels"]}


def test_every_series_the_dashboard_queries_is_exported_by_a_service() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    names = exported_names()
    missing = {title: sorted(series - names) for title, series in queried(dashboard).items() if series - names}
    assert not missing, f"the dashboard queries series no service exports: {missing}"
    assert all(series for series in queried(dashboard).values()), "a panel queries nothing of ours"


@pytest.mark.parametrize("needed", ["rla_critic_round_metric", "rla_consumer_pending", "rla_events_dead_lettered_total",
                                    "rla_version_lag_seconds", "rla_critic_trajectories_total",
                                    "rla_critic_metrics_round", "rla_nats_connected"])
def test_the_dashboard_covers_what_operators_watch(needed: str) -> None:
    assert any(needed in series for series in queried(json.loads(DASHBOARD.read_text())).values()), needed


def test_the_monitoring_overlay_ships_the_dashboard_and_scrapes_every_service_pod() -> None:
    manifests = render("monitoring")
    config_map = next(o for o in manifests.of_kind("ConfigMap") if o["metadata"]["name"] == "rlanything-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["rlanything-dashboard.json"]) == json.loads(DASHBOARD.read_text())
    monitor = next(o for o in manifests.objects if o["kind"] == "PodMonitor")
    selector = monitor["spec"]["selector"]["matchLabels"]
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    pods = [d for d in manifests.of_kind("Deployment") if d["metadata"]["name"] != "nats"]
    assert pods
    for d in pods:
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in selector.items()), d["metadata"]["name"]
        ports = {p["name"]: p["containerPort"] for c in d["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
        assert endpoint["port"] in ports, (d["metadata"]["name"], ports)
