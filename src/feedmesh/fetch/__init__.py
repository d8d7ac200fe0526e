"""fetch package."""
