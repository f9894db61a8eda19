"""The ingest service: a product's live conversations and feedback, redacted at first touch,
kept as durable episodes and handed to the loop once settled."""
