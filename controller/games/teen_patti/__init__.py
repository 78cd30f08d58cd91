"""The teen_patti game: its rules, live step machine and par sheet."""
