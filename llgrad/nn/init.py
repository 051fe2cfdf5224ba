"""llgrad.nn.init: filled by the layers work."""
