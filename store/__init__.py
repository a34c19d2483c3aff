"""hitrate.store: SQLite ledger, normalized usage, prices and cost.

Modules: `usage` (the `Usage` buckets and flags), `normalize` / `normalize_anthropic` (raw
provider payloads -> `Usage`, never raising), `usage_reader` (the lenient field reading and the
flag codes they share), `prices` (the dated, sourced `PriceTable` over `prices_snapshot.json`),
`litellm_import` (LiteLLM price-map importer), `cost` (`cost()` per call, `aggregate()` over
calls), `records` / `ledger_schema` / `ledger_rows` / `ledger` (the SQLite ledger).
"""
