"""Value types several packages share and none owns: pure, standard library only.

* ``events`` — what an outbound event about an incident is (its type, where its delivery stands)
  and its idempotency key. The journal stores them, the human-leg policy decides them, the
  payload carries them.
"""
