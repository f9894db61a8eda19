"""Prometheus metrics of the critic (served on the process's /metrics endpoint)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter, Gauge

__all__ = ["GROUPS_CLOSED", "TRAJECTORIES", "SAMPLES_EMITTED", "GROUPS_OPEN", "ROUND_METRIC", "METRICS_ROUND",
           "export_round"]

GROUPS_CLOSED = Counter("rla_critic_groups_closed_total", "Groups closed, by kind (complete, partial).", ["kind"])
TRAJECTORIES = Counter("rla_critic_trajectories_total",
                       "Judged trajectories handled, by outcome: stored (new rollout), repeated (a rollout "
                       "already stored, overwritten), late (its group was already reported; dropped).", ["outcome"])
SAMPLES_EMITTED = Counter("rla_critic_samples_total", "Training samples published, by model (policy, reward).",
                          ["model"])
GROUPS_OPEN = Gauge("rla_critic_groups_open", "Groups still collecting rollouts.")
ROUND_METRIC = Gauge("rla_critic_round_metric",
                     "The latest value of each per-round metric (key = slash-namespaced name, e.g. "
                     "reward/step_accuracy), for the round in rla_critic_metrics_round.", ["key"])
METRICS_ROUND = Gauge("rla_critic_metrics_round", "Round whose metrics rla_critic_round_metric shows.")


def export_round(round_: int, values: Mapping[str, float]) -> None:
    """Show one round's metrics on the gauges (the round most recently updated; no stale keys)."""
    METRICS_ROUND.set(round_)
    ROUND_METRIC.clear()
    for key, value in values.items():
        ROUND_METRIC.labels(key).set(value)
