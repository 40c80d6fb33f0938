"""Built-in process factories and the discovery of third-party ones."""
