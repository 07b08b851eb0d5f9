"""The human sink (M4 §10): the pieces of an outbound, signed, retried webhook.

Pure modules (standard library only, ``now`` and random draws passed in):

* ``retry`` — classify one attempt and decide the next (full-jitter backoff, ``Retry-After``);
* ``keys`` — event types and the idempotency key ``hash(incidentId, eventType, eventRevision)``;
* ``signing`` — Standard Webhooks secrets, signatures and their verification.

At the edge:

* ``payload`` — the versioned event payload (``contracts/webhook/``) and its builder, the one
  place that decides what may leave fleetd (§10.5);
* ``contract`` — the payload's JSON Schema file, generated and drift-checked;
* ``sink`` — the target (URL, secret, limit) resolved from config and environment;
* ``request`` — a signed request ready to send;
* ``http`` — the httpx sender: one POST, response body ignored, an outcome value back;
* ``receiver`` — a local receiver that verifies and prints events (demo and tests).

The dispatcher loop, the journal's outbox rows and the routing that decides *whether* a person is
told live elsewhere; this package only knows *how*.
"""
