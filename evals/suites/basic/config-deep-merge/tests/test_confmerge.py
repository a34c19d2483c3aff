import copy

from confmerge import deep_merge


def test_top_level_override():
    assert deep_merge({"a": 1, "b": 2}, {"b": 3, "c": 4}) == {"a": 1, "b": 3, "c": 4}


def test_lists_are_replaced_not_concatenated():
    assert deep_merge({"x": [1, 2]}, {"x": [3]}) == {"x": [3]}


def test_inputs_are_not_modified():
    base = {"db": {"host": "a", "port": 1}, "debug": False}
    override = {"db": {"port": 2}, "debug": None}
    base_before, override_before = copy.deepcopy(base), copy.deepcopy(override)
    deep_merge(base, override)
    assert base == base_before
    assert override == override_before


def test_merges_nested_dicts_at_any_depth():
    base = {"a": {"b": {"c": 1, "d": 2}, "e": 3}}
    override = {"a": {"b": {"d": 20, "f": 30}}}
    assert deep_merge(base, override) == {"a": {"b": {"c": 1, "d": 20, "f": 30}, "e": 3}}


def test_none_removes_a_key():
    assert deep_merge({"a": 1, "b": {"c": 2, "d": 3}}, {"a": None, "b": {"c": None}}) == {"b": {"d": 3}}
    assert deep_merge({"a": 1}, {"z": None}) == {"a": 1}


def test_result_shares_no_containers_with_inputs():
    base = {"only_base": {"k": [1]}, "both": {"x": 1}}
    override = {"only_override": {"k": [2]}, "both": {"y": [3]}}
    result = deep_merge(base, override)
    result["only_base"]["k"].append(99)
    result["only_override"]["k"].append(99)
    result["both"]["y"].append(99)
    assert base == {"only_base": {"k": [1]}, "both": {"x": 1}}
    assert override == {"only_override": {"k": [2]}, "both": {"y": [3]}}
