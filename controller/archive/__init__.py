"""The studio archive: every table's entries in PostgreSQL, verified, exactly once.

A consumer of the tables' MQTT topics (``events``, ``results``, ``status``), not part of a
table's controller. Parts: :mod:`~controller.archive.config` (``archive.toml``),
:mod:`~controller.archive.ingest` (a message → entry, status or rejection; pure),
:mod:`~controller.archive.store` (PostgreSQL through psycopg 3),
:mod:`~controller.archive.migrate` (versioned SQL migrations), :mod:`~controller.archive.gaps`
(gap book-keeping; pure), :mod:`~controller.archive.consumer` (the MQTT side),
:mod:`~controller.archive.recall` (a round from the archive). docs/archive.md.
"""
