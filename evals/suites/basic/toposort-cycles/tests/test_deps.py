import pytest

from deps import CycleError, topo_sort


def test_chain():
    assert topo_sort({"a": ["b"], "b": ["c"], "c": []}) == ["c", "b", "a"]


def test_dependency_only_nodes_are_included():
    order = topo_sort({"app": ["lib"]})
    assert order == ["lib", "app"]


def test_empty_graph():
    assert topo_sort({}) == []


def test_ready_nodes_come_out_alphabetically():
    assert topo_sort({"b": [], "a": [], "c": ["a"]}) == ["a", "b", "c"]
    graph = {"z": ["m", "b"], "m": [], "b": [], "a": ["z"]}
    assert topo_sort(graph) == ["b", "m", "z", "a"]
    assert graph == {"z": ["m", "b"], "m": [], "b": [], "a": ["z"]}


def test_cycle_raises_with_the_cycle():
    with pytest.raises(CycleError) as info:
        topo_sort({"start": ["c"], "c": ["a"], "a": ["b"], "b": ["c"]})
    assert info.value.cycle == ["a", "b", "c"]


def test_self_dependency_is_a_cycle():
    with pytest.raises(CycleError) as info:
        topo_sort({"x": ["x"], "y": []})
    assert info.value.cycle == ["x"]
