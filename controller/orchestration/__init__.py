"""The parts of a round's play the orchestrator (:mod:`controller.orchestrator`) is made of.

* :mod:`.inbox`: the one queue the card source's reads and the wake-ups come through;
* :mod:`.desk`: what every part shares (the round in progress, the journal, the device's
  commands, the slot's waiting state, the settle between cards);
* :mod:`.dealing`: one slot dealt: the cue, the reads, misreads, refusals, the device away,
  the halt (the slot's waiting state is :class:`.dealing.SlotWait`);
* :mod:`.decisions`: one decision window and the commands that close it;
* :mod:`.answers`: the answers to inbound commands (decisions, pit void and resume, replay).
"""
