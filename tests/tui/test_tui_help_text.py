"""The /help text keeps its `<placeholders>` once rendered as markdown."""

from __future__ import annotations

from markdown_it import MarkdownIt

from hitrate.tui.commands import help_markdown


def _rendered_text(markdown: str) -> str:
    # The parser the app's Markdown widget uses; plain text is what a reader sees.
    tokens = MarkdownIt("gfm-like").parse(markdown)
    return "".join(
        child.content for token in tokens if token.type == "inline" for child in token.children or []
        if child.type in ("text", "code_inline")
    )


def test_placeholders_survive_rendering():
    text = _rendered_text(help_markdown([("ctrl+c", "cancel <the> turn")]))
    assert "openai-compat/<model>@<url>" in text
    assert "local/<path>" in text
    assert "cancel <the> turn" in text
    assert "/model <spec>" in text
