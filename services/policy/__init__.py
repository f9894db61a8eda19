"""Policy service: generation backends, rollout workers, the policy trainer and its checkpoints."""
