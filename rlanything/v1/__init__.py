"""Generated stubs of package rlanything.v1 (run `make proto`)."""
