"""Hierarchical multilingual event-grounding dataset from Wikidata, Wikipedia and Wikinews (issue 3)."""
