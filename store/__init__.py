"""hitrate.store: SQLite ledger, normalized usage, prices and cost.

Modules: `usage` (the `Usage` buckets), `normalize` (raw provider payloads -> `Usage`),
`prices` (the dated, sourced `PriceTable` over `prices_snapshot.json`), `litellm_import`
(LiteLLM price-map importer), `cost` (`cost()` per call, `aggregate()` over calls),
`records` / `ledger_schema` / `ledger`
(the SQLite ledger).
"""
