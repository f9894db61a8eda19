"""`python -m services.critic --config FILE`: start the critic service (how Kubernetes runs it)."""

from services.common.entry import service_main

if __name__ == "__main__":
    service_main("critic", "services.critic.service:CriticService")
