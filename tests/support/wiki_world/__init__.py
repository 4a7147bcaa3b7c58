"""Fixture world for the wiki event-grounding build."""
