from reports.model import Row, format_cents
from reports.registry import register


@register("text")
def to_text(rows: list[Row]) -> str:
    table = [("name", "quantity", "price")]
    table += [(r.name, str(r.quantity), format_cents(r.price_cents)) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(3)]
    return "\n".join(
        "  ".join([line[0].ljust(widths[0]), line[1].rjust(widths[1]), line[2].rjust(widths[2])])
        for line in table
    )
