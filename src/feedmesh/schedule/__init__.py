"""schedule package."""
