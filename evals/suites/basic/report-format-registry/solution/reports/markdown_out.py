from reports.model import Row, format_cents
from reports.registry import register


@register("markdown")
def to_markdown(rows: list[Row]) -> str:
    lines = ["| name | quantity | price |", "| --- | ---: | ---: |"]
    lines += [f"| {r.name} | {r.quantity} | {format_cents(r.price_cents)} |" for r in rows]
    return "\n".join(lines)
