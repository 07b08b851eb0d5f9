"""The human leg's pure core: what a person is told (policy), when to try again (retry),
which receiver next (failover) and how a body is signed (signing). No I/O."""
