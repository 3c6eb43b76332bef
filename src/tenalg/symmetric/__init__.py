"""Symmetric block-sparse tensors."""
