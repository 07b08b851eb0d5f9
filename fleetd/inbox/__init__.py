"""The typed reply inbox: records, codec, the ``ReplyInbox`` port and its adapters.

Import what you need from the submodules: ``records`` and ``codec`` (pure), ``port``,
``memory`` (``InMemoryInbox``), ``amqp`` (``AmqpInbox``, with its connection in ``amqp_link``,
``amqp_brokers`` and ``amqp_connect``, and its consumer in ``amqp_collect``), ``registry``
(``LeadInboxRegistry``) and ``outbox`` (``LeadOutbox``, which holds, flushes and drains the
records of leads). The adapter
is chosen in the composition root (:func:`fleetd.compose.build_inbox`). This package module
imports nothing on purpose, so the pure modules load without the AMQP client or the event loop.
"""
