"""The typed reply inbox: records, codec, the ``ReplyInbox`` port and its adapters.

Import what you need from the submodules: ``records`` and ``codec`` (pure), ``port``,
``memory`` (``InMemoryInbox``), ``amqp`` (``AmqpInbox``) and ``registry`` (``LeadInboxRegistry``
and ``build_inbox``, which picks the adapter from plain config values). This package module
imports nothing on purpose, so the pure modules load without the AMQP client or the event loop.
"""
