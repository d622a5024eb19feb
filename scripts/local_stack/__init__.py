"""The embedded local stack: moto (serialized), a real PostgreSQL, the loopback
payment gateway, and an EMF metrics collector. ``python -m scripts.local_stack``."""
