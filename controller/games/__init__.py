"""The rules of our games. Pure: no I/O, no clock, deterministic given cards and decisions."""
