"""hitrate.tools: the agent's tools (files, edits, search, shell) and the workspace sandbox policy."""
