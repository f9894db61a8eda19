"""`rlanything run`: the whole closed loop on one machine, measured (cold start, services, report)."""
