"""The golden fixtures' code: the case table (cases.py), the exact oracle (oracle.py), the rule it
derives each dtype's budget by (rule.py) and the values it computes (expected.py), the writer
(generate.py) and the reader (reader.py). The fixture files themselves are data, in fixtures/ at
the top of the checkout; this package is named apart from them so that tools which skip fixture
folders as data do not skip the oracle."""
