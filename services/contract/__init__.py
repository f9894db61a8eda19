"""Executable service contracts: clauses run against any implementation's address."""
