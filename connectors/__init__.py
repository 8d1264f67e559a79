"""Connectors: the long-running adapters between Kadence's topics and the world outside the
engine, each a service of its own: the projections (``projection_app``, Faust: the history topic
into Redis read models, rebuildable), the archiver (closed runs' histories into an archive store,
then purged), the bridges (a domain topic's records into workflow starts and signals), ``verify``
(a namespace's histories and states checked against each other) and the rebuild tools. They
import the kernel (``kadence.topics``), the read models and the stores; the processors, the SDK
and the gateway never import them.
"""
