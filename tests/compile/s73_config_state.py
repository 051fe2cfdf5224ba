"""A module of the user's for test_contract_s73_state_c.py: a count a compiled function
keeps in it (`config.calls += 1`)."""
calls = 0
