"""Shipped reader profiles (latched RFID readers: ``drivers/reader_profile.py``)."""
