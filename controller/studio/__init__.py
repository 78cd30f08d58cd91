"""``tablectl studio``: one web service for a studio floor, fed by the tables' MQTT topics.

The parts (docs/studio.md):

* :mod:`controller.studio.config`: ``studio.toml`` (:class:`StudioSettings`);
* :mod:`controller.studio.view`: the pure view of one table (a fold of its messages);
* :mod:`controller.studio.feed`: the floor (every table's view) fed by one MQTT connection,
  and the secure-delay floor fed by the secure role's connection, held back by the delay;
* :mod:`controller.studio.web`: the Starlette app (pages, WebSockets);
* :mod:`controller.studio.server`: the service (feeds and uvicorn in one TaskGroup).

The pit-boss console (``/pit``) is the package ``controller.studio.pit``, mounted by
:func:`controller.studio.web.build_studio_app` when the config has a ``[pit]`` section.
"""
