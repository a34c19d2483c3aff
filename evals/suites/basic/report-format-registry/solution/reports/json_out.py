import json

from reports.model import Row, format_cents
from reports.registry import register


@register("json")
def to_json(rows: list[Row]) -> str:
    items = [{"name": r.name, "quantity": r.quantity, "price": format_cents(r.price_cents)} for r in rows]
    return json.dumps(items, indent=2)
