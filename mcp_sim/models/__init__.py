"""Model management: the registry of known world models, Hugging Face downloads, settings, doctor."""
