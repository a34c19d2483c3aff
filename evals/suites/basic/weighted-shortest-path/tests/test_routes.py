import pytest

import routes

GRAPH = {
    "a": {"b": 10.0, "c": 1.0},
    "c": {"d": 1.0},
    "d": {"b": 1.0},
    "b": {"e": 2.0},
}


def test_fewest_hops():
    assert routes.fewest_hops(GRAPH, "a", "e") == ["a", "b", "e"]


def test_fewest_hops_no_route():
    with pytest.raises(routes.NoRoute):
        routes.fewest_hops(GRAPH, "e", "a")


def test_cheapest_route_may_have_more_hops():
    cost, path = routes.shortest_path(GRAPH, "a", "e")
    assert path == ["a", "c", "d", "b", "e"]
    assert cost == pytest.approx(5.0)


def test_start_equals_goal():
    assert routes.shortest_path(GRAPH, "e", "e") == (0.0, ["e"])


def test_unreachable_or_unknown_raises_no_route():
    with pytest.raises(routes.NoRoute):
        routes.shortest_path(GRAPH, "e", "a")
    with pytest.raises(routes.NoRoute):
        routes.shortest_path(GRAPH, "a", "nowhere")


def test_negative_weight_is_rejected():
    with pytest.raises(ValueError):
        routes.shortest_path({"a": {"b": 1.0}, "x": {"y": -1.0}}, "a", "b")
