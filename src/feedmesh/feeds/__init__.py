"""feeds package."""
