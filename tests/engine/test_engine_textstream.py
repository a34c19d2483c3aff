"""Incremental decoding and stop strings, independent of any model."""

from __future__ import annotations

from transformers import AutoTokenizer

from hitrate.engine.textstream import IncrementalDecoder, StopStringFilter, plain_decode


def test_incremental_decoder_never_splits_a_character(tiny_llama_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    text = "naïve café 😀 déjà vu — done"
    ids = tokenizer(text)["input_ids"]
    decoder = IncrementalDecoder(tokenizer, context_ids=tokenizer("prefix ")["input_ids"])
    pieces = [decoder.push(i) for i in ids]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def test_plain_decode_equals_the_tokenizers_decode(tiny_llama_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    ids = tokenizer("naïve café 😀, déjà vu — done.  Two  spaces")["input_ids"]
    decode = plain_decode(tokenizer)
    assert decode.__code__ is not plain_decode(object()).__code__  # the backend's own decode, not the wrapper
    for end in range(1, len(ids) + 1):
        assert decode(ids[:end]) == tokenizer.decode(ids[:end], skip_special_tokens=True)


def test_plain_decode_keeps_the_wrapper_when_the_tokenizer_cleans_up(tiny_llama_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    tokenizer.clean_up_tokenization_spaces = True  # a post-pass the backend does not run
    decode = plain_decode(tokenizer)
    ids = tokenizer("a , b .")["input_ids"]
    assert decode.__code__ is plain_decode(object()).__code__
    assert decode(ids) == tokenizer.decode(ids, skip_special_tokens=True)


def test_stop_filter_holds_back_a_possible_stop_and_cuts_at_the_first():
    stops = StopStringFilter(("END", "STOP!"))
    streamed = [stops.push(p) for p in ["hello E", "N", "x wor", "ld ST", "OP!", " tail"]]
    assert "".join(streamed) == "hello ENx world "
    assert streamed[0] == "hello " and streamed[1] == ""  # "EN" might still become "END"
    assert stops.stopped and stops.text == "hello ENx world "
    assert stops.push("more") == ""


def test_stop_filter_flush_releases_held_text_and_no_stops_passes_through():
    stops = StopStringFilter(("<end>",))
    assert stops.push("abc<en") == "abc"
    assert stops.flush() == "<en"
    plain = StopStringFilter(())
    assert plain.push("x") == "x" and plain.push("y") == "y" and plain.text == "xy"


def test_stop_string_spanning_pieces_is_found():
    stops = StopStringFilter(("\n\n",))
    assert stops.push("line one\n") == "line one"
    assert stops.push("\nline two") == ""
    assert stops.stopped and stops.text == "line one"
