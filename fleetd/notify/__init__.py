"""The human sink (M4 §10): the pieces of an outbound, signed, retried webhook.

Pure modules (standard library only, ``now`` and random draws passed in):

* ``policy`` — which events a person gets about an incident (open, reminder, resolved, what is
  cancelled or re-armed): the human leg's only decision, carried out by the escalation shell;
* ``retry`` — classify one attempt and decide the next (full-jitter backoff, ``Retry-After``);
* ``signing`` — Standard Webhooks secrets, signatures and their verification;
* ``failover`` — one attempt across the ordered receivers: what each dial's outcome means to the
  breaker and the sweep, and the event's fate when the sweep ends (on ``retry`` and the pure
  :mod:`fleetd.resilience`).

At the edge:

* ``payload`` — the versioned event payload (``contracts/webhook/``) and its builder, the one
  place that decides what may leave fleetd (§10.5);
* ``contract`` — the payload's JSON Schema file, generated and drift-checked;
* ``sink`` — the target (receiver URLs, secret, limit) resolved from config and environment;
* ``receivers`` — the ordered receivers with a breaker each, and the failover sweep of one
  attempt (sticky primary);
* ``request`` — a signed request ready to send;
* ``kinds`` — one delivery path, several destination kinds: each kind's request and the statuses
  that mean fleetd built a bad one; the encoders of the kinds other than ``webhook`` are
  ``alertmanager``, ``pagerduty`` and ``slack`` (pure: an event in, bytes out);
* ``http`` — the httpx sender: one POST, response body ignored, an outcome value back;
* ``worker`` — :class:`~fleetd.notify.worker.SinkWorker`, the delivery pass: claims due attempts
  from the journal, sweeps the receivers, records each outcome while its lease holds;
* ``sink_health`` — whether the sink works, judged after every pass (what coverage shows);
* ``desk`` — what an operator or a lead may ask of the journal over the API (incidents, replay);
* ``receiver`` — a local receiver that verifies and prints events (demo and tests).

The event types, their states and the idempotency key are shared values
(:mod:`fleetd.model.events`); the signing secret belongs to the config
(:mod:`fleetd.config.secrets`). Routing (whether a person holds an incident) is health's; the
shell that carries out the policy is :mod:`fleetd.runtime.escalation`.
"""
