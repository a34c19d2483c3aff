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


def _justify_line(words: list[str], width: int) -> str:
    if len(words) == 1:
        return words[0].ljust(width)
    gaps = len(words) - 1
    spaces = width - sum(len(w) for w in words)
    base, extra = divmod(spaces, gaps)
    parts = []
    for i, word in enumerate(words[:-1]):
        parts.append(word + " " * (base + (1 if i < extra else 0)))
    parts.append(words[-1])
    return "".join(parts)


def justify(text: str, width: int) -> list[str]:
    """`wrap`'s lines, each but the last widened to exactly `width`."""
    lines = wrap(text, width)
    return [_justify_line(line.split(" "), width) for line in lines[:-1]] + lines[-1:]
