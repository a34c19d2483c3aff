import pytest

from pqueue import PriorityQueue


def drain(queue):
    return [queue.pop() for _ in range(len(queue))]


def test_lowest_priority_first():
    queue = PriorityQueue()
    for item, priority in [("c", 3), ("a", 1), ("b", 2)]:
        queue.push(item, priority)
    assert queue.peek() == "a"
    assert drain(queue) == ["a", "b", "c"]


def test_empty_queue_raises():
    with pytest.raises(IndexError):
        PriorityQueue().pop()
    with pytest.raises(IndexError):
        PriorityQueue().peek()


def test_equal_priorities_are_first_in_first_out():
    queue = PriorityQueue()
    for item in ["zeta", "alpha", "mid"]:
        queue.push(item, 5)
    queue.push("first", 1)
    assert drain(queue) == ["first", "zeta", "alpha", "mid"]


def test_items_need_not_be_comparable():
    queue = PriorityQueue()
    queue.push({"job": 2}, 1)
    queue.push({"job": 1}, 1)
    assert drain(queue) == [{"job": 2}, {"job": 1}]


def test_remove():
    queue = PriorityQueue()
    for item, priority in [("x", 2), ("y", 1), ("x", 1), ("z", 1)]:
        queue.push(item, priority)
    queue.remove("x")
    assert len(queue) == 3
    assert drain(queue) == ["y", "x", "z"]
    with pytest.raises(ValueError):
        queue.remove("nope")
