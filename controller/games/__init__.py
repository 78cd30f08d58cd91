"""Our games, one package each, listed once in :mod:`controller.games.registry`.

A game's ``rules`` are pure (no I/O, no clock, no numpy; deterministic given cards and
decisions); its ``live`` module runs them at the table and its ``par_sheet`` analyses them.
"""
