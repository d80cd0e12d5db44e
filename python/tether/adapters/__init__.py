"""Adapters that turn an agent framework's stream into Tether events with no glue.

- :mod:`tether.adapters.pydantic_ai`: a pydantic-ai ``Agent``'s run
  (``run_stream_events``, or the events of ``iter``'s nodes).
- :mod:`tether.adapters.langgraph`: a LangGraph graph's
  ``astream(..., stream_mode="messages")``.

Each needs its framework installed (``pip install 'tether-client[pydantic-ai]'``
or ``'tether-client[langgraph]'``); importing this package needs neither.
"""
