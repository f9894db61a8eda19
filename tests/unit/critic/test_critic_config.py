"""The critic's config section: defaults from docs/algorithm.md, constraints, band check."""

from __future__ import annotations

import pytest

from services.common.config import load_config
from services.common.errors import ConfigError


def test_defaults_follow_the_paper() -> None:
    c = load_config(None).critic
    assert (c.lam, c.lone_rollout_advantage, c.policy_band, c.rm_band_low, c.rm_band_high, c.invalid_vote_penalty) == (
        1.0, "zero", True, 0.2, 0.8, -2.0)
    assert (c.groups_bucket, c.stats_bucket) == ("critic_groups", "critic_stats") and c.group_timeout_s > 0


@pytest.mark.parametrize(("override", "message"), [
    ("critic.lam=-1", r"critic\.lam: .*greater than or equal to 0"),
    ("critic.lone_rollout_advantage=mean", r"critic\.lone_rollout_advantage: .*'zero' or 'raw'"),
    ("critic.group_timeout_s=0", r"critic\.group_timeout_s: .*greater than 0"),
    ("critic.invalid_vote_penalty=1", r"critic\.invalid_vote_penalty: .*less than or equal to 0"),
    ("critic.groups_bucket=a.b", r"critic\.groups_bucket: String should match pattern"),
    ("critic.rm_band_low=0.9", r"critic: .*rm_band_low \(0\.9\) must not exceed rm_band_high \(0\.8\)"),
])
def test_bad_values_are_rejected_by_name(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])
