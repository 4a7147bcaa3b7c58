"""Thin Prefect tasks around the eventatlas core (the core itself never imports Prefect)."""
