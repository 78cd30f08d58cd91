"""The break_poker game: its rules, live step machine and par sheet."""
