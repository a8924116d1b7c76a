"""Every default of mcp-sim, in one place: CLI flags, model manifests and constructors all read these.

Precedence where it matters: a flag when given, else the model's manifest, else the value here.
"""

from __future__ import annotations

# The model and its context.
ENGINE = "llama"  # --engine: a name in mcp_sim/engines/registry.py
CTX = 8192
STATE_CACHE_MB = 1024  # memory per model instance for saved session states (prefix reuse)
# Disk for system prompts' model states kept across restarts (0: none), in PROMPT_CACHE_DIR unless one is given.
PROMPT_CACHE_MB = 2048
PROMPT_CACHE_ENV = "MCP_SIM_PROMPT_CACHE_DIR"
PARALLEL = 1
# Calls decoded together in one context of N sequences (continuous batching); 1: one call at a time.
SLOTS = 1
# When a world outgrows the context, the share of the history's room freed at once (see fit_to_context).
CONTEXT_DROP_FRACTION = 0.25
# The most tokens of a world's history a prompt holds (0: as many as the context holds). A bounded window keeps
# a long session's calls as cheap as its early ones; live state still holds every record the older turns wrote.
HISTORY_TOKENS = 0
# Attention models: drop the oldest turns by shifting the model state instead of re-reading the history.
CONTEXT_SHIFT = True
# Flash attention in llama.cpp: no consistent gain measured on this CPU build (docs/BENCHMARKS.md, bench_decode.py).
FLASH_ATTN = False
# Check the output grammar against each sampled token, filtering the whole vocabulary only on a rejection.
LAZY_GRAMMAR = True
# Feed the spans the answer's grammar forces in one batch (engines/llama/forced.py), in json.dumps's layout.
JUMP_FORWARD = True
# llama.cpp's extra CPU buffer types (weights repacked for AMX or for AVX2/NEON kernels): "auto" uses them
# except on a CPU whose llama.cpp reports AMX, where the first decode segfaults (llama.cpp #20824).
CPU_REPACK = "auto"
CPU_REPACK_CHOICES = ("auto", "on", "off")

# Where the model runs: "worker" in a process of its own (a native crash ends its calls, not the server),
# "inline" in the server's process, "auto" a worker for engines that would otherwise run the model in-process.
ENGINE_PROCESS = "auto"
ENGINE_PROCESS_CHOICES = ("auto", "worker", "inline")
# A model process that dies this many times within this many seconds is not started again for a while:
# calls fail fast with the reason instead of reloading the model for ever.
ENGINE_RESTART_LIMIT = 3
ENGINE_RESTART_WINDOW_S = 60.0

# `doctor`'s decode probe (a model load and a few tokens in a child process): seconds before it gives up.
DOCTOR_PROBE_TIMEOUT_S = 120

# Sampling.
MAX_TOKENS = 512
TEMPERATURE = 0.2
TOP_P = 0.95
TOP_K = 40
REPEAT_PENALTY = 1.1
SEED = 0
THINK_BUDGET = 1024

# Answers and arguments.
ATTEMPTS = 3
MAX_ARGUMENT_BYTES = 64 * 1024
# Seconds one call may take once its world's turn comes; 0: no limit (a slow model may take minutes).
CALL_TIMEOUT_S = 0.0
# Examples of each tool in the shared system prompt; a call of a tool with more brings the NEAREST_EXAMPLES of
# the rest nearest to its arguments (an indexed spec shows none in its system prompt, so all are "the rest").
SHOWN_EXAMPLES = 2
NEAREST_EXAMPLES = 2
# learn: the most characters of examples kept per tool (every distinct one that fits, farthest first).
LEARN_TOOL_CHARS = 6000
# Grammar bounds on every unbounded string and array, so a small model cannot loop.
MAX_STRING = 80
MAX_ITEMS = 5
# The smallest room left for the prompt itself once the answer and reasoning budgets are set aside.
MIN_PROMPT_ROOM = 512
# Room kept for a world's history and the call when a spec's system prompt is fitted to the context; a spec
# whose tools do not fit beside it lists them one per line (mcp_sim.core.prompt_budget).
HISTORY_ROOM = 1024
# The least room an indexed spec must leave for the definition of the tool called.
MIN_DEFINITION_TOKENS = 256

# `import-openapi`: the most characters of an API document's own description that go into the world description
# (its first paragraphs; the rest is left out, and the description says so). A real one (Rubrik's, 550 KB) made a
# world description of ~175k tokens that no small model can read.
IMPORT_DESCRIPTION_CHARS = 6000

# Serving.
MAX_QUEUE = 64
# The most bytes of tool definitions one tools/list page holds (the Python SDK reads at most 1 MiB per event).
TOOLS_PAGE_BYTES = 512 * 1024
MAX_WORLDS = 256
# A shared world store (Postgres): connections per instance (each call in progress holds one for its world's
# lock; the scheduler runs only --parallel x --slots calls at once), and how long a call waits for one, or
# for Postgres to answer a connection, before it is an isError naming the store.
STORE_POOL_SIZE = 32
STORE_WAIT_S = 5.0
HOST = "127.0.0.1"
PORT = 8765
HTTP_PATH = "/mcp"
RECORD_PORT = 8766
# Streamable HTTP: SSE events kept for clients that reconnect (Last-Event-ID), and the retry interval their
# streams announce (ms).
SSE_EVENTS_KEPT = 10_000
SSE_RETRY_MS = 1000
# serve --reload: how often the spec files are looked at (size and modification time) for a change.
RELOAD_POLL_S = 1.0

# The OpenAI-compatible engine.
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
OPENAI_MAX_INFLIGHT = 4
OPENAI_TIMEOUT_S = 300.0
# The largest stdio line read, in characters (bytes, for ASCII JSON); a longer one is answered with an error.
# Above 16 MB requests still fit (10 MB strings reach --max-argument-bytes and are refused by it, with their id).
STDIO_MAX_LINE_CHARS = 16 * 1024 * 1024
# The largest HTTP body read, in bytes: the SDK's own default; a larger one gets a JSON-RPC 413.
HTTP_MAX_BODY_BYTES = 4 * 1024 * 1024

# CPU threads when --threads is not given, for prompt and generation alike and in both decoders: every core
# on a machine with up to this many, else half the cores (llama.cpp's own choice, which leaves hyper-threads
# idle) but never fewer than this.
THREADS_ALL_CORES_UP_TO = 4

# Fault rules (--faults, x-sim.faults): each kind's parameters when a rule leaves them out.
FAULT_RETRY_AFTER_S = 30  # rate_limit
FAULT_LATENCY_MS = 1000  # latency
FAULT_OVERSIZED_BYTES = 1024 * 1024  # oversized
FAULT_PROTOCOL_ERROR_CODE = -32603  # protocol_error: JSON-RPC's internal error
FAULT_PROTOCOL_ERROR_MESSAGE = "Internal error"
# How long a `timeout` fault holds a call that no client cancels (a client that never gives up, or
# `mcp-sim call`); then it answers an isError saying so, so that no worker thread is held for ever.
FAULT_TIMEOUT_HOLD_S = 600.0

# The fidelity harness (`mcp-sim eval --rel-tol`): how far a number may be from the real one and still match.
REL_TOL = 0.1

# The world page (/ui): how often the world store is asked whether a world changed, in seconds; a change is
# pushed to open pages over SSE. Asking the store (not this process) shows calls of every instance sharing it.
UI_POLL_S = 0.5
# How many calls' details (answer source, latency, faults) a server remembers for the page, all worlds
# together; the store keeps every call itself, the page shows older ones without these details.
UI_CALL_DETAILS = 10_000
