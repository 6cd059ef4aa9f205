"""Growth actions: their rows, their transition history, evaluations, policy and the engine's inputs."""
