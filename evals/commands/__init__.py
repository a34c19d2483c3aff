"""The evals CLI commands (eval, report, whatif, suite, demo, ledger-merge), registered through entry points."""
