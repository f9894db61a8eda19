"""Pure formulas shared by several services (no I/O), each citing arXiv 2602.02488."""
