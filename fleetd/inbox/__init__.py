"""The typed reply inbox: records, codec, the ``ReplyInbox`` port and its adapters.

Import what you need from the submodules (``records``, ``codec``, ``port``, ``memory``, ``amqp``,
``registry``). This package module imports nothing on purpose, so the pure ``records`` and
``codec`` modules load without the AMQP client or the event loop.
"""
