"""hitrate.engine: local inference engine (transformers runner, radix prefix cache, KV pool, HTTP server)."""
