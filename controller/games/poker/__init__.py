"""Standard high-poker hand evaluation (five and seven cards) shared by the poker games."""
