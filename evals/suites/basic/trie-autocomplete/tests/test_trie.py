import trie


def build(*words):
    t = trie.Trie()
    for word in words:
        t.insert(word)
    return t


def test_insert_and_contains():
    t = build("tea", "ten", "tea")
    assert "tea" in t and "ten" in t
    assert "te" not in t
    assert len(t) == 2


def test_node_count_shares_prefixes():
    assert build("to", "tea").node_count() == 5
    assert trie.Trie().node_count() == 1


def test_count_tracks_repeated_inserts():
    t = build("tea", "tea", "ten")
    assert t.count("tea") == 2
    assert t.count("ten") == 1
    assert t.count("te") == 0
    assert len(t) == 2


def test_complete_ranks_by_count_then_word():
    t = build("car", "cart", "cart", "care", "cat", "dog", "ca")
    assert t.complete("ca") == ["cart", "ca", "car", "care", "cat"]
    assert t.complete("") == ["cart", "ca", "car", "care", "cat", "dog"]


def test_complete_limit_and_unknown_prefix():
    t = build("car", "cart", "cart", "care")
    assert t.complete("car", limit=2) == ["cart", "car"]
    assert t.complete("x") == []


def test_delete_prunes_nodes():
    t = build("tea")
    assert t.delete("tea") is True
    assert t.node_count() == 1 and len(t) == 0
    t = build("te", "tea", "tea")
    assert t.delete("tea") is True
    assert "te" in t and "tea" not in t and t.count("tea") == 0
    assert t.node_count() == 3
    assert t.delete("tea") is False
    assert t.delete("t") is False
    t = build("te", "tea")
    assert t.delete("te") is True
    assert "tea" in t and t.node_count() == 4
