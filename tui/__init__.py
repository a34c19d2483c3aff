"""hitrate.tui: the interactive Textual app."""
