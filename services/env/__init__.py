"""Environment service: task families, episode sessions, the task pool and the round scheduler."""
