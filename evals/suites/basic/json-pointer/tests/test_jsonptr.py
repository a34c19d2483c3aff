import copy

import pytest

import jsonptr

DOC = {"a": {"b": [10, 20, {"c": "deep"}]}, "a/b": 1, "m~n": 2, "": 3}


def test_resolve_nested():
    assert jsonptr.resolve(DOC, "/a/b/2/c") == "deep"
    assert jsonptr.resolve(DOC, "/a/b/0") == 10


def test_empty_pointer_is_the_whole_document():
    assert jsonptr.resolve(DOC, "") is DOC


def test_missing_key_raises_pointer_error():
    with pytest.raises(jsonptr.PointerError):
        jsonptr.resolve(DOC, "/nope")


def test_escaped_tokens():
    assert jsonptr.resolve(DOC, "/a~1b") == 1
    assert jsonptr.resolve(DOC, "/m~0n") == 2
    assert jsonptr.resolve(DOC, "/") == 3
    assert jsonptr.resolve({"~1": "literal"}, "/~01") == "literal"


def test_array_index_rules():
    for bad in ["/a/b/01", "/a/b/-1", "/a/b/x", "/a/b/-", "/a/b/3"]:
        with pytest.raises(jsonptr.PointerError):
            jsonptr.resolve(DOC, bad)
    with pytest.raises(jsonptr.PointerError):
        jsonptr.resolve(DOC, "/a/b/0/x")


def test_pointer_must_start_with_slash():
    with pytest.raises(ValueError):
        jsonptr.resolve(DOC, "a/b")


def test_set_value_returns_a_new_document():
    before = copy.deepcopy(DOC)
    updated = jsonptr.set_value(DOC, "/a/b/2/c", "new")
    assert updated["a"]["b"][2]["c"] == "new"
    assert DOC == before
    assert jsonptr.set_value(DOC, "/a/x~1y", 5)["a"]["x/y"] == 5
    assert jsonptr.set_value(DOC, "", 7) == 7


def test_set_value_in_arrays():
    doc = {"items": [1, 2]}
    assert jsonptr.set_value(doc, "/items/-", 3) == {"items": [1, 2, 3]}
    assert jsonptr.set_value(doc, "/items/0", 9) == {"items": [9, 2]}
    assert doc == {"items": [1, 2]}
    with pytest.raises(jsonptr.PointerError):
        jsonptr.set_value(doc, "/items/5", 0)


def test_set_value_needs_an_existing_parent():
    with pytest.raises(jsonptr.PointerError):
        jsonptr.set_value({"a": {}}, "/missing/child", 1)
