"""The three-card machinery Teen Patti 20-20 and Three Card Mulligan share."""
