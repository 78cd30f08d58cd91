"""The three_card_mulligan game: its rules, live step machine and par sheet."""
