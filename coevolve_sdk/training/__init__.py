"""The agent and how it learns: the policy and algorithm bases and the rollout of groups."""
