"""Incremental decoding and stop strings, independent of any model."""

from __future__ import annotations

from transformers import AutoTokenizer

from hitrate.engine.textstream import IncrementalDecoder, StopStringFilter


def test_incremental_decoder_never_splits_a_character(tiny_llama_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    text = "naïve café 😀 déjà vu — done"
    ids = tokenizer(text)["input_ids"]
    decoder = IncrementalDecoder(tokenizer, context_ids=tokenizer("prefix ")["input_ids"])
    pieces = [decoder.push(i) for i in ids]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


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
