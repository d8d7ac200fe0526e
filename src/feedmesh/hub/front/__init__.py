"""What readers and the web layer reach: the facade, private feed tokens and documents, and where
private feeds are held."""
