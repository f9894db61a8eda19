"""Critic service: task groups, integrated advantages, consistency rewards, task reports, metrics."""
