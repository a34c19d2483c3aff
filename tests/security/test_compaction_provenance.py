"""Compaction turns model-written text into a user turn: an instruction planted in a file the agent
read came back after compaction inside the user-role summary, whose header did not say the model
wrote it. The header now says who wrote it and that it is unverified, and the instruction asks for
the user's constraints from the user's own messages only."""

from __future__ import annotations

from hitrate.projection.compaction import SUMMARY_HEADER, compaction_instruction


def test_the_summary_header_says_the_model_wrote_it_unverified() -> None:
    header = SUMMARY_HEADER.lower()
    assert "written by the model" in header and "unverified" in header and "not the user's" in header


def test_the_instruction_keeps_only_the_users_own_constraints() -> None:
    text = compaction_instruction()
    first = text.split("\n1. ", 1)[1].split("\n2. ", 1)[0].lower()
    assert "in their own messages" in first
    assert "tool output" in first and "not the user's" in first
    assert "any constraints or preferences they stated" not in text
