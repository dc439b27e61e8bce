"""Sweep engines, one module each; every module here is imported and registers itself."""
