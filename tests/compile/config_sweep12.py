"""A config module of the user's for tests/compile/test_contract_sweep12.py: its settings
change between compiled calls."""
SCALE = 2.0
W = None
