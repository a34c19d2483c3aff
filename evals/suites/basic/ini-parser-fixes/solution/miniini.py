"""A small INI parser: sections of string settings."""


class ParseError(ValueError):
    def __init__(self, line_no: int, message: str) -> None:
        self.line_no = line_no
        super().__init__(f"line {line_no}: {message}")


def parse(text: str) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = {}
    section: str | None = None
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            if not line.endswith("]") or not line[1:-1].strip():
                raise ParseError(line_no, f"bad section header: {line!r}")
            section = line[1:-1].strip()
            result.setdefault(section, {})
            continue
        if "=" not in line:
            raise ParseError(line_no, f"expected 'key = value', got {line!r}")
        if section is None:
            raise ParseError(line_no, "setting before any section header")
        key, value = line.split("=", 1)
        result[section][key.strip().lower()] = value.strip()
    return result
