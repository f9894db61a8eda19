"""Language models shared by the policy and the reward model: building, loading, generating."""
