"""Simulated devices speaking the real wire protocol, with fault injection."""
