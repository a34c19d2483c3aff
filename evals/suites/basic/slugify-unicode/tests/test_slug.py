from slug import slugify


def test_simple_words():
    assert slugify("Hello World") == "hello-world"
    assert slugify("abc123") == "abc123"


def test_accents_are_folded():
    assert slugify("Crème Brûlée") == "creme-brulee"
    assert slugify("日本 guide") == "guide"


def test_runs_collapse_and_edges_are_trimmed():
    assert slugify("  Hello,  World!  ") == "hello-world"
    assert slugify("a -- b") == "a-b"


def test_max_length_cuts_at_a_word_boundary():
    assert slugify("the quick brown fox", 12) == "the-quick"
    assert slugify("the quick brown fox", 9) == "the-quick"
    assert slugify("the quick brown fox", 100) == "the-quick-brown-fox"


def test_max_length_cuts_a_single_long_word():
    assert slugify("supercalifragilistic", 5) == "super"
