"""`python -m services.policy --config FILE`: start the policy service (how Kubernetes runs it)."""

from services.common.entry import service_main

if __name__ == "__main__":
    service_main("policy", "services.policy.service:PolicyService")
