"""Conversational memory.

`_capture` (DSH events to exchanges), `_conversation` (bounded, redacted deliveries), `_consent`,
`_recall` and `_recall_search` (first-step recall), `_tools` (capture, recall and the memory tools
together). Its configuration is `harness_plugin.config._memory`.
"""
