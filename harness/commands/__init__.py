"""The harness's own CLI commands (run, serve, ledger, prices, lint) and their shared formatting."""
