"""The world page: a live view of each world's calls, its state and what each call changed (`serve` at /ui).

routes.py (HTTP), site.py (what a page reads), view.py (a world as timeline and tables: pure logic), events.py
(SSE), call_log.py (the call details the store does not keep), templates/ and static/ (no CDN: works offline).
"""
