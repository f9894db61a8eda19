"""Code shared by every service: config, errors, event bus, gRPC runtime, logging, metrics."""
