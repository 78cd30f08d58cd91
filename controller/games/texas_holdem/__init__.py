"""The texas_holdem game: its rules, live step machine and par sheet."""
