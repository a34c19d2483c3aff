import textfmt

TEXT = "This is an example of text justification."


def test_wrap_is_greedy():
    assert textfmt.wrap(TEXT, 16) == ["This is an", "example of text", "justification."]


def test_wrap_puts_long_words_alone():
    assert textfmt.wrap("a extraordinary b", 5) == ["a", "extraordinary", "b"]


def test_justify_spreads_spaces_leftmost_first():
    assert textfmt.justify(TEXT, 16) == ["This    is    an", "example  of text", "justification."]
    assert textfmt.justify("a b c d e", 8) == ["a  b c d", "e"]


def test_single_word_lines_are_padded():
    assert textfmt.justify("hello world", 7) == ["hello  ", "world"]


def test_last_line_is_left_aligned():
    lines = textfmt.justify("one two three four five", 10)
    assert lines[-1] == "five"
    assert all(len(line) == 10 for line in lines[:-1])


def test_long_word_and_empty_text():
    assert textfmt.justify("a extraordinary b", 5) == ["a    ", "extraordinary", "b"]
    assert textfmt.justify("   ", 10) == []
