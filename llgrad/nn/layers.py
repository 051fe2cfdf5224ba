"""Layers: filled next."""
