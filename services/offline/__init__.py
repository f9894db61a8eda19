"""One-machine work composed from the services: cold starts (SFT of the policy and the judge),
expert episodes, offline judge evaluation and the tiny-model bootstrap.

Only composition code imports this package (`services/run/`, `services/cli.py`, scripts, tests);
the services themselves never do (tests/unit/test_boundaries.py).
"""
