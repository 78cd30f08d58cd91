"""The outbox, split by job; :class:`controller.publisher.Publisher` is its façade.

* :mod:`controller.outbox.delivery`: the pipelined hand-off of journal entries, settled in
  ``seq`` order as the PUBACKs come; ``wait_idle`` and ``flush``.
* :mod:`controller.outbox.sending`: one message to the client (hand-off or awaited), and
  the refusals the broker answers with.
* :mod:`controller.outbox.snapshots`: the retained round snapshot, folded lazily.
* :mod:`controller.outbox.replay`: ``replay --from-seq``.
"""
