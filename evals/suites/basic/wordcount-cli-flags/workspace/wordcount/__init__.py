"""Count words in text files."""
