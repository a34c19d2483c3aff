"""Wilson interval and percentiles against published / numpy values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hitrate.evals.stats import percentile, wilson_interval


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # Reference values (Wilson 1927 score interval, z = 1.96): e.g. Newcombe (1998), Table I.
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (81, 263, 0.2553, 0.3662),
    ],
)
def test_wilson_known_values(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_wilson_needs_trials_and_sane_counts():
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


@given(st.integers(1, 500), st.data())
def test_wilson_contains_the_point_estimate(n, data):
    k = data.draw(st.integers(0, n))
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50), st.sampled_from([0, 10, 50, 90, 100]))
def test_percentile_matches_numpy_linear(values, q):
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


def test_percentile_of_nothing_is_none():
    assert percentile([], 50) is None
