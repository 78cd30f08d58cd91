"""Talking to the MQTT broker: one home for the connection and for paho's internals.

* :mod:`controller.mqtt.settings`: :class:`~controller.mqtt.settings.MqttSettings`, TLS,
  client options, the back-off formula.
* :mod:`controller.mqtt.connection`: :class:`~controller.mqtt.connection.Connector`, the one
  client life-cycle (connect timeout, URL failover, back-off) every long-lived client uses.
* :mod:`controller.mqtt.adapter`: every use of paho internals (a move to aiomqtt 3 touches
  this file only).
* :mod:`controller.mqtt.ack`: a QoS 1 publish whose refusal (v5 PUBACK reason code) raises.
"""
