"""Generated protobuf contracts of RLAnything."""
