"""Talking to the MQTT broker: one client on paho-mqtt's public API, one connection life-cycle.

* :mod:`controller.mqtt.client`: :class:`~controller.mqtt.client.Client`, paho-mqtt 2 driven
  on the asyncio loop through its public external-loop API (PUBACK reason codes, manual
  acknowledgements, bursts of reads, writes inside ``publish()``).
* :mod:`controller.mqtt.settings`: :class:`~controller.mqtt.settings.MqttSettings`, TLS,
  client options, the back-off formula.
* :mod:`controller.mqtt.connection`: :class:`~controller.mqtt.connection.Connector`, the one
  client life-cycle (connect timeout, URL failover, back-off) every long-lived client uses.
* :mod:`controller.mqtt.adapter`: the shared helpers (hand-off, reason codes, properties).
* :mod:`controller.mqtt.ack`: a QoS 1 publish whose refusal (v5 PUBACK reason code) raises.
* :mod:`controller.mqtt.drain`: the archive's drain, the one module that uses paho's internals
  (pinned paho version; public fallback).
"""
