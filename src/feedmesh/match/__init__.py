"""match package."""
