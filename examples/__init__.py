"""Small LightningModules written the ordinary Lightning way, for `advisor probe` (examples/README.md)."""
