"""Live play, generic part: the step protocol, shared checks, and the fixed-plan adapter.

Each game's step machine lives in its package (``controller/games/<game>/live.py``).
"""
