"""`python -m services.ingest --config FILE`: start the ingest service (how Kubernetes runs it)."""

from services.common.entry import service_main

if __name__ == "__main__":
    service_main("ingest", "services.ingest.service:IngestService")
