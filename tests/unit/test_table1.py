"""The Table-1 ablation's pure parts: rows, per-run summaries, the markdown table, curve bands."""

from __future__ import annotations

import math

import pytest

from services.common.config import load_config
from services.run.table1 import ROWS, aggregate, curve_bands, summarize_run, table_markdown


def records(heldout: tuple[float, float], acc_step: float, band: float) -> list[dict[str, float]]:
    return [
        {"round": 0.0, "policy/success_heldout": heldout[0], "policy/success_ood": 0.1, "policy/success_train": 0.2,
         "reward/step_accuracy": 0.5, "env/in_band_share": band, "env/accepted_total": 0.0},
        {"round": 1.0, "policy/success_train": 0.4, "reward/step_accuracy": acc_step, "env/in_band_share": band,
         "env/accepted_total": 2.0},
        {"round": 2.0, "policy/success_heldout": heldout[1], "policy/success_ood": 0.3, "policy/success_train": 0.6,
         "reward/step_accuracy": acc_step, "env/in_band_share": band, "env/accepted_total": 3.0},
    ]


def test_rows_are_valid_overrides_of_the_default() -> None:
    assert [r.key for r in ROWS] == ["outcome", "step_reward", "rm_training", "full"]
    for row in ROWS:
        load_config("configs/default.yaml", list(row.overrides))  # each row is a valid config
    outcome = load_config("configs/default.yaml", list(ROWS[0].overrides))
    assert outcome.critic.lam == 0 and outcome.reward.frozen and not outcome.env.adaptation.enabled
    full = load_config("configs/default.yaml", list(ROWS[-1].overrides))
    assert full.critic.candidate_samples == "accepted" and full.env.adaptation.enabled  # the paper's rules
    assert full.env.adaptation.retry_rejected == 0 and not full.env.scheduler.skip_pending


def test_summary_takes_last_eval_gain_and_tail_means() -> None:
    s = summarize_run(records((0.4, 0.7), 0.8, 0.5), tail=2)
    assert s["heldout"] == 0.7 and s["heldout_gain"] == pytest.approx(0.3) and s["ood"] == 0.3
    assert s["train"] == pytest.approx(0.5) and s["rm_step_accuracy"] == pytest.approx(0.8)
    assert s["in_band"] == pytest.approx(0.5) and s["accepted"] == 3.0
    assert math.isnan(summarize_run([{"round": 0.0}])["heldout"])


def test_aggregate_and_table() -> None:
    runs = [summarize_run(records((0.4, 0.6), 0.7, 0.5)), summarize_run(records((0.4, 0.8), 0.9, 0.7))]
    agg = aggregate(runs)
    assert agg["heldout"][0] == pytest.approx(0.7) and agg["heldout"][1] == pytest.approx(0.1)
    assert agg["heldout"][2] == 2
    md = table_markdown({"full": runs}, "# T")
    assert "| + environment adaptation (full RLAnything) | 2 | 0.700 ± 0.100 |" in md
    assert "| outcome only (λ=0, frozen judge, no adaptation) | 0 | – |" in md
    assert md.splitlines()[-1].endswith("| +0.200 / +0.400 |")  # each seed's gain, in seed order


def test_curve_bands_by_round() -> None:
    bands = curve_bands([records((0.4, 0.6), 0.7, 0.5), records((0.2, 0.8), 0.7, 0.5)], "policy/success_heldout")
    assert [b[0] for b in bands] == [0, 2]
    assert bands[1][1] == pytest.approx(0.7) and bands[1][2] == pytest.approx(0.1)
