"""RLAnything services: env, policy, reward, critic, and the code they share (`common`)."""
