import pytest

from intervals import merge_intervals, total_covered


def test_sorted_disjoint_and_overlapping():
    assert merge_intervals([(1, 3), (2, 6), (8, 10)]) == [(1, 6), (8, 10)]
    assert merge_intervals([(1, 10), (2, 3)]) == [(1, 10)]


def test_empty():
    assert merge_intervals([]) == []
    assert total_covered([]) == 0


def test_unsorted_input():
    assert merge_intervals([(8, 10), (1, 3), (2, 6)]) == [(1, 6), (8, 10)]
    assert total_covered([(5, 7), (1, 6)]) == 6


def test_touching_intervals_merge():
    assert merge_intervals([(1, 2), (2, 5)]) == [(1, 5)]


def test_invalid_interval_raises():
    with pytest.raises(ValueError):
        merge_intervals([(1, 2), (5, 3)])


def test_input_is_not_modified():
    data = [(4, 5), (1, 2)]
    merge_intervals(data)
    assert data == [(4, 5), (1, 2)]
    assert merge_intervals([[4, 5], [1, 2]]) == [(1, 2), (4, 5)]
