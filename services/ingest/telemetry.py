"""Prometheus metrics of the ingest service (served on the process's /metrics endpoint)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = ["CANDIDATES", "REQUESTS", "REFUSED", "REDACTIONS", "SETTLED", "FEEDBACK_DELAY", "OPEN_EPISODES", "ERASED", "CAPTURES",
           "LIVE_TURNS"]

REQUESTS = Counter("rla_ingest_requests_total", "Requests answered, by tenant, kind (episode, feedback) and "
                   "status (accepted, duplicate, superseded, applied, buffered, late).", ["tenant", "kind", "status"])
REFUSED = Counter("rla_ingest_refused_total", "Requests refused, by reason (unknown_tenant, tenant_mismatch, "
                  "no_consent, too_large, invalid, conflict, too_many_open, redaction_failed).", ["reason"])
REDACTIONS = Counter("rla_ingest_redactions_total", "Personal data replaced by a placeholder, by tenant (a configured "
                     "tenant name) and kind; an episode's revision adds only the findings it has beyond the stored "
                     "revision.", ["tenant", "kind"])
SETTLED = Counter("rla_ingest_settled_total", "Episodes settled and published, by tenant.", ["tenant"])
FEEDBACK_DELAY = Histogram("rla_ingest_feedback_delay_seconds",
                           "Seconds from an episode's latest revision to feedback about it.",
                           buckets=(1, 10, 60, 300, 1800, 3600, 6 * 3600, 86400))
OPEN_EPISODES = Gauge("rla_ingest_open_episodes", "Episodes not yet settled, by tenant (last sweep).", ["tenant"])
ERASED = Counter("rla_ingest_erased_total", "Episodes erased (tenant: bucket keys purged), by reason (user, "
                 "retention, tenant).", ["reason"])
CAPTURES = Counter("rla_ingest_captures_total", "Captured completions, by outcome (stored, joined: a turn of the "
                   "transcript claims it, orphan: none does, dropped at settling).", ["outcome"])
LIVE_TURNS = Counter("rla_ingest_live_turns_total", "Assistant turns of published live trajectories, by whether our "
                     "policy served them (served: token ids and log-probs captured; retokenized: captured, but redaction "
                     "changed the text so its ids were dropped; foreign: no capture, another model, or text the "
                     "product changed).", ["kind"])
CANDIDATES = Counter("rla_ingest_task_candidates_total", "Live failures offered as environment tasks, by outcome "
                     "(published, duplicate: the same failure within the duplicate window).", ["outcome"])
