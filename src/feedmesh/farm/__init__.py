"""farm package."""
