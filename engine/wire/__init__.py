"""The engine's HTTP wire APIs, one module each: parse, respond, stream, error shape."""
