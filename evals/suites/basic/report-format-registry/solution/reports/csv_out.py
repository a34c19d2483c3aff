import csv
import io

from reports.model import Row, format_cents
from reports.registry import register


@register("csv")
def to_csv(rows: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["name", "quantity", "price"])
    for row in rows:
        writer.writerow([row.name, row.quantity, format_cents(row.price_cents)])
    return buffer.getvalue()
