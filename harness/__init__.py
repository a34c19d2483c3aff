"""hitrate.harness: agent loop, sessions, router, provider adapters and the command line."""
