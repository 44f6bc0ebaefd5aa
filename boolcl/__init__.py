"""boolcl: Boolean contrastive continual training of dense retrievers."""
__version__ = "0.1.0"
