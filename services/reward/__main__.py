"""`python -m services.reward --config FILE`: start the reward service (how Kubernetes runs it)."""

from services.common.entry import service_main

if __name__ == "__main__":
    service_main("reward", "services.reward.service:RewardService")
