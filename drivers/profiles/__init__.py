"""Device profiles shipped with tablectl (package data: ``*.toml``, ``codes/*.toml``)."""
