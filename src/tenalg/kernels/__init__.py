"""Kernels: NumPy reference twins and Numba CPU kernels."""
