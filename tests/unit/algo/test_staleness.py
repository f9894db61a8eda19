"""The staleness bound at the optimizer step: which samples a trainer keeps."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.common.algo.staleness import count_within, cut_stale


def test_bound_zero_keeps_only_the_latest_versions_samples_and_counts_the_rest_per_family():
    items = [("a", 5, "gym_text"), ("b", 4, "gym_text"), ("c", 3, "textworld"), ("d", 5, "textworld"), ("e", 2, "")]
    cut = cut_stale(items, latest_version=5, max_staleness=0)
    assert cut.kept == ["a", "d"]
    assert dict(cut.dropped) == {"gym_text": 1, "textworld": 1, "unknown": 1}
    assert cut.max_kept == 0


def test_bound_one_keeps_one_version_behind():
    cut = cut_stale([("a", 5, "f"), ("b", 4, "f"), ("c", 3, "f")], latest_version=5, max_staleness=1)
    assert cut.kept == ["a", "b"] and dict(cut.dropped) == {"f": 1} and cut.max_kept == 1


def test_no_bound_keeps_everything_and_reports_the_worst_lag():
    cut = cut_stale([("a", 1, "f"), ("b", 7, "f")], latest_version=7, max_staleness=None)
    assert cut.kept == ["a", "b"] and not cut.dropped and cut.max_kept == 6


def test_negative_bound_is_refused_naming_the_value():
    with pytest.raises(ValueError, match="-1"):
        cut_stale([], 0, -1)


@given(st.lists(st.tuples(st.integers(0, 20), st.sampled_from(["x", "y"])), max_size=30),
       st.integers(0, 20), st.integers(0, 5))
def test_every_sample_is_kept_or_counted_and_no_kept_one_exceeds_the_bound(rows, latest, bound):
    items = [(i, v, fam) for i, (v, fam) in enumerate(rows)]
    cut = cut_stale(items, latest, bound)
    assert len(cut.kept) + sum(cut.dropped.values()) == len(items)
    assert all(latest - rows[i][0] <= bound for i in cut.kept)
    assert cut.max_kept <= bound


def test_count_within_counts_what_a_step_would_keep() -> None:
    versions = [5, 4, 3, 3, 0]
    assert count_within(versions, 5, 0) == 1
    assert count_within(versions, 5, 2) == 4
    assert count_within(versions, 5, None) == 5
    assert count_within([], 5, 1) == 0
    # the same rule as the cut itself
    assert count_within(versions, 5, 1) == len(cut_stale([(v, v, "f") for v in versions], 5, 1).kept)
    with pytest.raises(ValueError, match="max_staleness must be >= 0, got -1"):
        count_within(versions, 5, -1)
