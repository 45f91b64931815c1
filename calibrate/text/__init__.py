"""Text below every domain package: the sentence segmenter (sentences.py) and JSON parsed with a bound on nesting (json_values.py)."""
