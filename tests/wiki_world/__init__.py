"""Fixture world for the wiki event-grounding build (issue 3)."""
