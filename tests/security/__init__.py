"""Who may do what: tokens, access, trust, TLS, secrets, private files, hostile input and
fuzzing."""
