"""Adapters over the engines' real caches, imported from the installed packages."""
