"""Hindsight Experience Replay: replay buffer, agents, trainer."""
