"""The harness side of each provider's wire API: rendering a Prompt, streaming the call, reading usage and errors."""
