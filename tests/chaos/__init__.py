"""The chaos suite: real processes (controller, scanner simulator, Mosquitto), real faults."""
