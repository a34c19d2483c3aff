"""Split one line of comma-separated values into its fields."""


def parse_line(line: str, delimiter: str = ",") -> list[str]:
    """Split `line` into fields separated by `delimiter`, honouring double quotes."""
    fields = []
    current = ""
    in_quotes = False
    for ch in line:
        if ch == '"':
            in_quotes = not in_quotes
        elif ch == delimiter and not in_quotes:
            fields.append(current)
            current = ""
        else:
            current += ch
    fields.append(current)
    return fields
