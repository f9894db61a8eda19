"""`python -m services.env --config FILE`: start the env service (how Kubernetes runs it)."""

from services.common.entry import service_main

if __name__ == "__main__":
    service_main("env", "services.env.service:EnvService")
