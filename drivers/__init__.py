"""Device drivers: the wire codec, transports, card-source drivers and their supervisor."""
