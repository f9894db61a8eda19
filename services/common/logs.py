"""Structured logging: one JSON object per line on stderr, with the service name on every line."""

from __future__ import annotations

import json
import logging
import sys
import time

__all__ = ["configure_logging", "JsonFormatter"]

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as JSON: ts (unix seconds), level, service, logger, msg, extra fields, exc."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def configure_logging(service: str, level: str = "INFO") -> logging.Logger:
    """Send every log record of this process to stderr as JSON lines; returns the service logger.

    Extra context goes in ``extra=``: ``log.info("acked", extra={"subject": s, "seq": 3})``.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.Formatter.converter = time.gmtime
    return logging.getLogger(f"rlanything.{service}")
