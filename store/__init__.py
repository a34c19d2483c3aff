"""hitrate.store: SQLite ledger, normalized usage, prices and cost."""
