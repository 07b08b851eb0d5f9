"""The typed reply inbox: records, codec, the ``ReplyInbox`` port and its adapters.

Import what you need from the submodules: ``records`` and ``codec`` (pure), ``port``,
``memory`` (``InMemoryInbox``), ``amqp`` (``AmqpInbox``, with its connection in ``amqp_link``,
``amqp_brokers`` and ``amqp_connect``, its consumer in ``amqp_collect``, the one edge with
aio-pika's types and errors in ``amqp_edge``, and the quarantine lane for entries that do not
decode in ``quarantine``), ``seen`` (the bounded first-id-wins dedup both adapters use),
``failures`` (one operator-visible record per bad entry), ``registry`` (``LeadInboxRegistry``)
and ``outbox`` (``LeadOutbox``, which holds, flushes and drains the records of leads). The
adapter is chosen in the composition root (:func:`fleetd.compose.build_inbox`). This package module
imports nothing on purpose, so the pure modules load without the AMQP client or the event loop.
"""
