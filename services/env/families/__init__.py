"""Task families: adapters from real environment libraries to the `TaskFamily` contract."""
