"""Fit text into lines of a given width."""


def wrap(text: str, width: int) -> list[str]:
    """Greedy line filling; words longer than `width` go alone on a line."""
    if width < 1:
        raise ValueError("width must be at least 1")
    lines: list[str] = []
    current: list[str] = []
    length = 0
    for word in text.split():
        if current and length + 1 + len(word) > width:
            lines.append(" ".join(current))
            current, length = [word], len(word)
        else:
            length += len(word) + (1 if current else 0)
            current.append(word)
    if current:
        lines.append(" ".join(current))
    return lines
