"""Live play of each game at the table: the step protocol and one adapter per game."""
