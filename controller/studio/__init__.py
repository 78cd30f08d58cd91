"""The studio service: web pages for the people at the tables (issue #14)."""
