"""Text below every domain package: the sentence segmenter (sentences.py)."""
