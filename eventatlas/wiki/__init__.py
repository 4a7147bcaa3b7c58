"""Hierarchical multilingual event-grounding dataset from Wikidata, Wikipedia and Wikinews."""
