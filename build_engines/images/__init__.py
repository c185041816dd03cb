"""The images' pip installs, read from their recipes and replayed through pip's resolver."""
