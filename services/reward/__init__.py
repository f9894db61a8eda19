"""Reward-model service: the generative step judge, the RM trainer and its checkpoints."""
