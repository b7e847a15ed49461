"""A self-made sample corpus with planted near-duplicates, and the demo run."""
