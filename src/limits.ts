// Every size, count and duration the product enforces, named with its unit, each with the reason for it.
// This is their only home in src/; messages are built from these constants. worker.py repeats the ones
// the Python side enforces, and tests/unit/worker-limits.test.ts fails when the two disagree.

// Messages and frames
/** Python source of one cell: enough for any hand-written cell, small enough to echo in errors. */
export const CODE_MAX_BYTES = 262_144;
/** One worker frame, newline included, either direction: bounds the memory a line can take. */
export const FRAME_MAX_BYTES = 1_048_576;
/** One MCP message on our stdio, either direction. */
export const MCP_MESSAGE_MAX_BYTES = 1_048_576;
/** Messages toward our MCP client accepted at once: a client that stops reading costs at most these. */
export const CLIENT_WRITE_QUEUE_MESSAGES = 4;
/** The stdio client's opening burst is over when it sends nothing for this long (see jit.ts). */
export const JIT_OPENING_QUIET_MS = 100;
/** ... or at the latest this long after start, however busy it is. */
export const JIT_OPENING_MAX_MS = 2_000;
/** A client that reads none of our output for this long is treated as gone (the server stops). */
export const CLIENT_WRITE_STALL_MS = 30_000;
/**
 * Answers owed to the MCP client that its pipe has not taken yet. Past it, we serve no more of its
 * requests until it reads (each answer may be up to a message long), so a client that stops reading
 * while pipelining requests costs a few MiB, not one answer per request.
 */
export const CLIENT_OUTPUT_BACKLOG_MAX_BYTES = 4 * 1_048_576;
/** Requests read from the client and waiting for that backlog to drain; past it we stop reading stdin. */
export const CLIENT_INPUT_WAITING_MAX_BYTES = 4 * 1_048_576;
/**
 * What one message owed to a pipe's reader costs beyond its own bytes while it waits for the write
 * queue (its promises and timer, about a KiB measured), counted in the backlog and in the waiting bytes
 * so that a flood of tiny answers (a refused bad line is ~100 bytes) is bounded in number too.
 */
export const PIPE_MESSAGE_OVERHEAD_BYTES = 2_048;
/** One control line to a guardian: the spawn spec carries a whole environment. */
export const GUARDIAN_SPEC_MAX_BYTES = 1_048_576;
/** How long the server keeps trying to hand a guardian its control line before giving up on it. */
export const GUARDIAN_CONTROL_WRITE_TIMEOUT_MS = 5_000;
/** How long a guardian that is ending waits for its last events to reach the server before it goes. */
export const GUARDIAN_EVENT_FLUSH_MS = 200;
/** How long a guardian waits for the child it killed to be gone before it leaves (a SIGKILL takes effect at once; its exit, not quite). */
export const GUARDIAN_CHILD_EXIT_WAIT_MS = 1_000;

// Results
/** A whole CallToolResult; over it, the text block is replaced (clients cap results near 1 MB). */
export const TOOL_RESULT_MAX_BYTES = 1_000_000;
/** The text block's preview; structuredContent has the full bounded value. */
export const TEXT_PREVIEW_MAX_BYTES = 8_192;
/**
 * The text of a `text`-style result (server/styles/), which has no structuredContent behind it: room for a
 * run's whole bounded stdout, well under Claude Code's ~25k-token cap on a tool result.
 */
export const TEXT_STYLE_MAX_BYTES = 56_000;
/** stdout and stderr each, in a final result. */
export const STREAM_CAPTURE_MAX_BYTES = 50_000;
/** stdout and stderr each, as python_run shows them while a run is active. */
export const LIVE_STREAM_MAX_BYTES = 65_536;
/** Native fd-2 output kept per run before the final cut to STREAM_CAPTURE_MAX_BYTES. */
export const NATIVE_STDERR_MAX_BYTES = 65_536;
/** The safe preview of a cell's trailing value (enforced by worker.py). */
export const RETURN_PREVIEW_MAX_BYTES = 20_000;
/** An error message or traceback summary (enforced by worker.py). */
export const ERROR_TEXT_MAX_BYTES = 20_000;
/** Columns a value_info names (and gives dtypes for): a wide frame still makes a small result (worker.py). */
export const VALUE_INFO_COLUMNS_MAX = 50;

// Runs
/** A run's timeout range and default, in seconds (the same range bounds mcp.call timeouts). */
export const TIMEOUT_MIN_SECONDS = 0.01;
export const TIMEOUT_MAX_SECONDS = 3_600;
export const TIMEOUT_DEFAULT_SECONDS = 120;
/** After SIGINT, how long a cell may take to stop before its worker is killed. */
export const INTERRUPT_GRACE_MS = 2_000;
/** From spawning a worker to its ready frame; a slow interpreter shim still fits. */
export const WORKER_READY_TIMEOUT_MS = 10_000;
/** A worker that does not read one frame within this is stuck and is killed. */
export const FRAME_WRITE_TIMEOUT_MS = 5_000;
/** Frames queued for a worker's stdin; a command never waits behind a long backlog. */
export const WRITER_QUEUE_FRAMES = 4;
/** How long a result waits for the worker's stderr barrier (its native output). */
export const STDERR_DRAIN_BARRIER_MS = 1_000;
/** A worker asked to leave (stdin EOF) gets this long before it is killed. */
export const WORKER_EXIT_WAIT_MS = 3_000;
/** A new run waits this long for a run being cancelled to free the slot (grace + margin). */
export const BUSY_WAIT_WHILE_CANCELLING_MS = 3_500;
/** Finished results kept per session for python_run. */
export const HISTORY_RUNS = 64;
/** Bridge requests (mcp.*) one run may have outstanding. */
export const RPC_CONCURRENCY = 64;
/** How long the ops of the mcp helper (servers, refresh, journal, explain) wait, in seconds (worker.py). */
export const RPC_RESULT_WAIT_OPS_SECONDS = 35;
/** --max-memory-mib default: a worker's RSS ceiling, MiB. */
export const RSS_DEFAULT_MIB = 2_048;
/** How often a running worker's RSS is sampled. */
export const RSS_SAMPLE_INTERVAL_MS = 250;
/** python_session_inspect's namespace inventory, in seconds: it runs no user code. */
export const INVENTORY_TIMEOUT_SECONDS = 5;
/** python_execute_file's argv: count and total UTF-8 bytes (also enforced by worker.py). */
export const ARGV_MAX_ITEMS = 128;
export const ARGV_MAX_BYTES = 32_768;
/** A saved Python file run by python_execute_file (enforced by worker.py). */
export const PYTHON_FILE_MAX_BYTES = 262_144;

// Live progress (notifications/progress and task status): the newest output shown, and the pace.
/** The newest output quoted in a progress message: enough for a line or two, small enough to show. */
export const PROGRESS_OUTPUT_MAX_BYTES = 512;
/** Output kept per run to find its newest lines; a multiple of the quoted size. */
export const PROGRESS_TAIL_MAX_BYTES = 4_096;
/** A silent cell still gets a heartbeat; under 1 s so timer lateness never stretches a gap past 1 s. */
export const PROGRESS_HEARTBEAT_MS = 750;
/** At most four notifications a second while output flows. */
export const PROGRESS_MIN_GAP_MS = 250;

// MCP tasks: a task lives as long as its run stays in the session's run history and its ttl allows.
/** Retention when the client asks for no particular ttl. */
export const TASK_TTL_DEFAULT_MS = 3_600_000;
/** How often clients are asked to poll tasks/get. */
export const TASK_POLL_INTERVAL_MS = 500;
/**
 * Under 2026-07-28 the server decides when a call becomes a task: a run a client that takes tasks
 * started is answered inline if it ends within this long, and with a task otherwise, so short cells stay
 * one round trip and long ones stop holding the request open.
 */
export const TASK_PROMOTE_AFTER_MS = 1_000;
/** tasks/list page size. */
export const TASK_LIST_PAGE_SIZE = 20;
/** Tasks remembered across all sessions (refused calls have no run history to bound them). */
export const TASKS_MAX = 1_024;

// display() and figures. Image sizes are counted as sent (base64), so that a result with the most
// pictures allowed still fits the 1 MiB message limit next to its text.
/** Displays inlined in one result; later ones are set aside. */
export const DISPLAYS_INLINE_MAX = 8;
/** One inlined image, base64 characters. */
export const DISPLAY_IMAGE_INLINE_MAX_BYTES = 524_288;
/** All inlined images of one result together, base64 characters. */
export const DISPLAY_IMAGES_RESPONSE_MAX_BYTES = 786_432;
/** The largest image assembled from the worker's chunks: its own 8 MiB cap, in base64. */
export const DISPLAY_IMAGE_ASSEMBLY_MAX_BYTES = 11_184_812;
/**
 * Inline pictures one session's run history holds, base64 characters: four results' worth, so the
 * latest four runs always keep theirs. Older runs' pictures become artifacts (docs/tools.md, "Pictures").
 */
export const HISTORY_INLINE_IMAGES_MAX_BYTES = 4 * DISPLAY_IMAGES_RESPONSE_MAX_BYTES;
/**
 * Archived pictures one session keeps as artifacts, the latest ones: the store is shared (64 entries), so
 * a long plotting loop must not push every other artifact out of it. Older ones are only described.
 */
export const HISTORY_ARCHIVED_PICTURES_MAX = 16;
/** Picture data archived out of run histories, base64 characters, after which the server collects (reclaim.ts). */
export const PICTURES_RELEASED_BEFORE_COLLECTION_BYTES = 4 * 1024 * 1024;
/** Set-aside displays kept as artifacts per run, so one plotting loop cannot evict every other artifact. */
export const DISPLAY_ARTIFACTS_PER_RUN = 8;
/** Base64 held for set-aside displays of one run until they are stored (about 24 MiB of pictures). */
export const DISPLAY_SET_ASIDE_MAX_BYTES = 33_554_432;

// Sessions and the server
/** Open sessions, the default one included; each may hold a worker. */
export const SESSIONS_MAX = 32;
/** Sessions being opened (interpreter probes running) at once. */
export const SESSION_OPENS_MAX = 4;
/** A session name, UTF-8 bytes. */
export const SESSION_NAME_MAX_BYTES = 128;
/** The interpreter probe's deadline and output. */
export const PROBE_TIMEOUT_MS = 10_000;
export const PROBE_OUTPUT_MAX_BYTES = 4_096;
/** Closing a session waits this long for its run to end before stopping the worker anyway. */
export const SESSION_CLOSE_WAIT_MS = 5_000;
/** Server shutdown: every session's run gets this long to end. */
export const SHUTDOWN_RUNS_WAIT_MS = 5_000;
/** Server shutdown ends the process after this even if something hangs (guardians clean up anyway). */
export const SHUTDOWN_LIMIT_MS = 6_000;

// Kept sessions (docs/sessions.md, "Keeping a session"): a worker parked by its guardian when the server
// goes, adopted by the next server.
/** --keep-sessions-max default: the longest keep a session may ask for (a week), in seconds. */
export const KEEP_MAX_DEFAULT_SECONDS = 7 * 86_400;
/** The longest --keep-sessions-max accepted (30 days): past that a forgotten worker is only a leak. */
export const KEEP_MAX_LIMIT_SECONDS = 30 * 86_400;
/**
 * Frames a parked guardian keeps for the next server (the result of the cell that ran across the
 * server's exit, and its output): past this the oldest output goes first, results last.
 */
export const PARKED_FRAMES_MAX_BYTES = 4 * 1_048_576;
/** Bytes a guardian holds toward its server's socket before it stops reading the worker's output. */
export const KEEPER_RELAY_BACKLOG_MAX_BYTES = 1_048_576;
/** Connecting to a guardian and proving the secret, for an adoption or a stop. */
export const ADOPT_HANDSHAKE_TIMEOUT_MS = 5_000;
/**
 * A guardian whose holder died but that has not yet seen it (its lifeline's EOF is milliseconds away):
 * how long an adopting server keeps asking before it calls the session held.
 */
export const ADOPT_HOLDER_GONE_WAIT_MS = 2_000;
/** A kept worker's guardian asked to end: how long beyond the grace the server waits before it kills the group. */
export const KEEPER_END_MARGIN_MS = 2_000;
/** A parking record or claim file: a page of JSON (no output, no credential). */
export const PARKING_RECORD_MAX_BYTES = 65_536;
/** The parking secret: random bytes (kept as twice as many hex digits in a 0600 file). */
export const PARKING_SECRET_BYTES = 32;
/** An adopted session's earlier runs as its worker returns them for the viewer: each output, and the whole answer. */
export const ADOPTED_HISTORY_OUTPUT_MAX_BYTES = 4_096;
export const ADOPTED_HISTORY_MAX_BYTES = 524_288;
/** A Unix socket path must fit sockaddr_un (104 bytes on macOS, 108 on Linux, the NUL included). */
export const UNIX_SOCKET_PATH_MAX_BYTES = 103;

// Broker
/** Calls in flight across the broker of one project; more wait in line until their deadline. */
export const BROKER_CONCURRENT_REQUESTS = 32;
/** Open peer connections; the least recently used idle one is closed past this. */
export const BROKER_LIVE_TRANSPORTS = 32;
/** mcp.call's default timeout, in seconds. */
export const BROKER_CALL_TIMEOUT_DEFAULT_SECONDS = 120;
/** mcp.list_tools / mcp.help default timeout, in seconds. */
export const BROKER_LIST_TIMEOUT_DEFAULT_SECONDS = 30;
/** A peer's tool catalogue: how long it is reused, how many are cached, and its size bounds. */
export const BROKER_CATALOGUE_TTL_MS = 15_000;
export const BROKER_CATALOGUE_ENTRIES = 32;
export const BROKER_CATALOGUE_MAX_BYTES = 1_048_576;
export const BROKER_CATALOGUE_MAX_TOOLS = 10_000;
export const BROKER_CATALOGUE_MAX_PAGES = 128;
/** The registry file is re-read when it is older than this. */
export const BROKER_REGISTRY_REFRESH_MS = 30_000;
/** After a failed connect, the peer is left alone this long (mcp.refresh() clears it). */
export const BROKER_CONNECT_COOLDOWN_MS = 60_000;
/** Starting a transport plus initialize. */
export const BROKER_CONNECT_MAX_MS = 30_000;
/** One line from a stdio peer, one HTTP body (or SSE event) from an HTTP peer. */
export const BROKER_PEER_LINE_MAX_BYTES = 1_048_576;
/** Messages toward one stdio peer accepted at once; a peer that stops reading costs at most these. */
export const BROKER_PEER_WRITE_QUEUE_MESSAGES = 4;
/** A stdio peer that reads none of its input for this long is stopped, failing its calls. */
export const BROKER_PEER_WRITE_STALL_MS = 30_000;
/**
 * Bytes we owe one stdio peer (requests and answers to its own requests) that its stdin has not taken.
 * Past it, the peer's own requests wait unanswered until it reads, like our client's (see
 * CLIENT_OUTPUT_BACKLOG_MAX_BYTES); our calls to it are bounded by BROKER_CONCURRENT_REQUESTS.
 */
export const BROKER_PEER_INPUT_BACKLOG_MAX_BYTES = 4 * 1_048_576;
/** A peer's requests waiting for that backlog to drain; past it we stop reading its stdout. */
export const BROKER_PEER_WAITING_MAX_BYTES = 4 * 1_048_576;
export const BROKER_HTTP_BODY_MAX_BYTES = 1_048_576;
/** A stdio peer asked to leave (stdin EOF) gets this long before it is killed. */
export const BROKER_PEER_CLOSE_GRACE_MS = 2_000;
/** A call's result delivered to a cell; leaves room in the 1 MiB frame for the envelope. */
export const BROKER_RESULT_MAX_BYTES = 900_000;
/** A call's arguments: bytes, nesting depth and values. */
export const BROKER_ARGUMENT_MAX_BYTES = 262_144;
export const BROKER_ARGUMENT_MAX_DEPTH = 64;
export const BROKER_ARGUMENT_MAX_NODES = 16_384;
/** A peer tool's inputSchema must be this simple to be validated in bounded time. */
export const BROKER_SCHEMA_MAX_BYTES = 65_536;
export const BROKER_SCHEMA_MAX_DEPTH = 32;
export const BROKER_SCHEMA_MAX_NODES = 2_048;
export const BROKER_SCHEMA_MAX_BRANCHES = 16;
export const BROKER_SCHEMA_MAX_PATTERN_CHARS = 256;
/** Compiled input-schema validators kept. */
export const BROKER_COMPILED_SCHEMAS_MAX = 256;
/** The registry file (.mcp.json, --config, ~/.claude.json). */
export const REGISTRY_FILE_MAX_BYTES = 1_048_576;
/** A server name, UTF-8 bytes. */
export const SERVER_NAME_MAX_BYTES = 200;
/** The tool name mcp.explain echoes back. */
export const EXPLAIN_TOOL_MAX_CHARS = 400;
/** Journal records kept in memory. */
export const JOURNAL_MAX_RECORDS = 256;
/** The whole journal serialized: small enough to hand to a cell in one RPC result. */
export const JOURNAL_MAX_SERIALIZED_BYTES = 900_000;
/** A journal file larger than this is not one we wrote. */
export const JOURNAL_FILE_MAX_BYTES = 1_048_576;
/**
 * The copy of a private file being rewritten in place (fs/in-place.ts): the largest such file (the
 * journal), its path and room to spare.
 */
export const REWRITE_COPY_MAX_BYTES = 2 * JOURNAL_FILE_MAX_BYTES;
/** Identity fields (session, run, server, tool) and the project path, as kept in a journal record. */
export const JOURNAL_TEXT_MAX_CHARS = 400;
export const JOURNAL_PROJECT_MAX_CHARS = 4_096;

// The person in the loop: approvals and input() (src/person/).
/** --approval-timeout-s: how long a question waits for the person, its default and range, in seconds. */
export const APPROVAL_TIMEOUT_DEFAULT_SECONDS = 300;
export const APPROVAL_TIMEOUT_MIN_SECONDS = 1;
export const APPROVAL_TIMEOUT_MAX_SECONDS = 3600;
/** The arguments an approval shows, as JSON: enough to judge a call, small enough for a dialog. */
export const APPROVAL_ARGUMENTS_MAX_CHARS = 2000;
/** The first line of a tool's title or description an approval shows. */
export const APPROVAL_SUMMARY_MAX_CHARS = 200;
/**
 * A registry secret shorter than this is not hidden in an approval: "1" or "true" would blank ordinary
 * arguments and protect nothing.
 */
export const SECRET_MIN_CHARS = 6;
/** An input() prompt as the person sees it. */
export const INPUT_PROMPT_MAX_CHARS = 2000;
/** One answer to input() (worker.py repeats it for the frame it reads). */
export const INPUT_ANSWER_MAX_CHARS = 65_536;
/** An elicitation request outlives its question by this much, so the question's own expiry decides. */
export const ELICITATION_MARGIN_MS = 5_000;
/** Questions one run may have waiting at once (mcp.acall can ask several). */
export const QUESTIONS_PER_RUN_MAX = 64;

// Kernel servers (--kernels, src/kernels/): Jupyter servers sessions may run on.
/** The kernel servers file: a page of JSON, like the registry. */
export const KERNELS_FILE_MAX_BYTES = 256 * 1024;
/** A tokenFile: one token and a newline. */
export const KERNEL_TOKEN_FILE_MAX_BYTES = 4_096;
/** A kernel's start deadline (startTimeoutS): its default and range, in seconds (a cluster may need minutes). */
export const KERNEL_START_TIMEOUT_DEFAULT_SECONDS = 60;
export const KERNEL_START_TIMEOUT_MAX_SECONDS = 900;
/** A kernel server's REST answer (other than a kernel start, which has the entry's startTimeoutS). */
export const KERNEL_REQUEST_TIMEOUT_MS = 30_000;
/** A WebSocket message from a kernel; bigger ones are dropped unparsed (ours carry one frame each). */
export const KERNEL_MESSAGE_MAX_BYTES = 64 * 1024 * 1024;
/**
 * How long a run waits for a dropped kernel connection to come back before its outcome is unknown (and
 * how long a connection that dropped between runs is tried again before it waits for the next run).
 */
export const KERNEL_RECONNECT_WAIT_MS = 10_000;
/** The pause before the second attempt to reconnect to a kernel (the first is at once); doubled after each. */
export const KERNEL_RECONNECT_FIRST_DELAY_MS = 250;
/** The longest pause between two attempts to reconnect, so that attempts keep coming while a run waits. */
export const KERNEL_RECONNECT_MAX_DELAY_MS = 1_000;
/** How long one attempt to open a kernel's WebSocket may take before it is dropped for a fresh one. */
export const KERNEL_RECONNECT_ATTEMPT_MS = 3_000;
/** How long a kernel restart may take (the server waits for the new kernel's first answer). */
export const KERNEL_RESTART_TIMEOUT_MS = 60_000;
/** The oldest Python a kernel may run (as for local interpreters). */
export const KERNEL_PYTHON_MIN = [3, 10] as const;
/** How long doctor waits for one kernel server's answer. */
export const KERNEL_PROBE_TIMEOUT_MS = 5_000;
/** A kernel server's kernelspec list, as doctor reads it. */
export const KERNEL_SPECS_MAX_BYTES = 1024 * 1024;

// OAuth for HTTP peers.
/** A credential file holds one client registration and one token response; anything bigger is not ours. */
export const OAUTH_CREDENTIAL_FILE_MAX_BYTES = 65_536;
/** Metadata discovery and dynamic registration, each request. */
export const OAUTH_DISCOVERY_TIMEOUT_MS = 30_000;
/** Token requests (code exchange, refresh, client credentials). */
export const OAUTH_TOKEN_TIMEOUT_MS = 30_000;
/** How long --oauth-login waits for the browser to come back. */
export const OAUTH_CALLBACK_WAIT_MS = 300_000;
/** The loopback callback request (URL and headers) and how long a connection may take to send it. */
export const OAUTH_CALLBACK_REQUEST_MAX_BYTES = 16_384;
export const OAUTH_CALLBACK_READ_TIMEOUT_SECONDS = 5;
/** A token this close to its expiry is refreshed before use, so it cannot lapse mid-request. */
export const OAUTH_REFRESH_MARGIN_SECONDS = 60;
/** Waiting for another process that is refreshing the same credential file. */
export const OAUTH_REFRESH_LOCK_WAIT_MS = 30_000;
/** How often a waiter retries a held lock file: short next to any lock wait, cheap in CPU. */
export const LOCK_RETRY_INTERVAL_MS = 25;

// Artifacts: whole values kept on the server so they never flood the agent's context.
/** One artifact's content; larger values should be saved to disk by the cell itself. */
export const ARTIFACT_MAX_BYTES = 16 * 1024 * 1024;
/** The whole store, across sessions; the oldest artifacts are evicted when a new one would exceed it. */
export const ARTIFACT_STORE_MAX_BYTES = 64 * 1024 * 1024;
export const ARTIFACT_STORE_MAX_ENTRIES = 64;
/** One artifact_read range: small enough to sit comfortably in an agent's context. */
export const ARTIFACT_READ_MAX_BYTES = 65_536;
/** artifact_forward: the payload travels inside one downstream tools/call message. */
export const ARTIFACT_FORWARD_MAX_BYTES = 512 * 1024;
/** resources/read answers in one MCP message (≤ 1 MiB); base64 grows content by a third. */
export const ARTIFACT_RESOURCE_MAX_BYTES = 512 * 1024;
/** Whole-content jobs (import, save, forward, resource read) running at once. */
export const ARTIFACT_IO_JOBS = 4;
/** Uploads begun by cells and not yet committed or aborted, server-wide. */
export const ARTIFACT_UPLOADS_MAX = 4;
/** One upload chunk before base64: 32 KiB, so an append frame stays small. */
export const ARTIFACT_CHUNK_BYTES = 32_768;
/** base64 of one chunk: ceil(32768 / 3) * 4. */
export const ARTIFACT_CHUNK_BASE64_CHARS = 43_692;
/**
 * One piece of an upload whose bytes the worker wrote into a file handed over to the server (Linux):
 * the server reads and hashes each piece while the worker writes the next.
 */
export const ARTIFACT_PIECE_MAX_BYTES = 1_048_576;
/** Nesting accepted when a JSON artifact is checked (the parser limit of the reference). */
export const ARTIFACT_JSON_MAX_DEPTH = 128;
/** HTTP transport: the TCP port when --port is not given. */
export const HTTP_PORT_DEFAULT = 8_765;
/** HTTP transport: an MCP session with no request for this long (and no run in progress) is ended. */
export const HTTP_IDLE_TIMEOUT_DEFAULT_SECONDS = 1_800;
/** A week: beyond that an abandoned client would hold its workers for no purpose. */
export const HTTP_IDLE_TIMEOUT_MAX_SECONDS = 604_800;
/** Bytes an HTTP client may leave unread across its SSE streams; more and the overflowing stream is cut. */
export const HTTP_SSE_BACKLOG_MAX_BYTES = 4_194_304;
/** A bearer token shorter than this is guessable; the server refuses to start with it. */
export const HTTP_TOKEN_MIN_CHARS = 16;
/** A token file larger than this is not a token. */
export const HTTP_TOKEN_FILE_MAX_BYTES = 4_096;
/** Seconds Bun may keep a connection with no traffic before an MCP request has been authenticated. */
export const HTTP_UNAUTHENTICATED_IDLE_SECONDS = 30;
/** The longest pause between two checks for idle HTTP clients. */
export const HTTP_IDLE_SWEEP_MAX_MS = 5_000;
/** Random bytes in a token the server makes for itself (printed as twice as many hex digits). */
export const HTTP_GENERATED_TOKEN_BYTES = 32;
/** An authenticated request body must have arrived whole within this; a slower one gets 408. */
export const HTTP_BODY_READ_TIMEOUT_MS = 30_000;
/** Viewer: event streams open at once (pages, tabs); one more is refused with 503. */
export const VIEWER_STREAMS_MAX = 4;
/** Viewer: bytes a page may leave unread on its event stream; more and the page is dropped (it reconnects). */
export const VIEWER_STREAM_BACKLOG_MAX_BYTES = 4_194_304;
/** Viewer: above this many unread bytes a page is sent no more output (it is told how much it missed). */
export const VIEWER_STREAM_OUTPUT_SKIP_BYTES = 1_048_576;
/** Viewer: characters of one run's output sent to pages per stream; beyond them pages are told how many were left out. */
export const VIEWER_RUN_OUTPUT_MAX_CHARS = 65_536;
/** Viewer: output waits this long to leave in one event, so a chatty cell costs one event per interval. */
export const VIEWER_OUTPUT_FLUSH_MS = 50;
/** Viewer: the part of a cell's source the page shows. */
export const VIEWER_SOURCE_MAX_BYTES = 16_384;
/** Viewer: a comment on each idle event stream this often, so proxies and browsers keep it open. */
export const VIEWER_KEEPALIVE_MS = 15_000;
/** Viewer: a request body (a cancel, an answer) larger than this is refused; room for the longest input() answer, escaped. */
export const VIEWER_BODY_MAX_BYTES = 512 * 1024;
/** Viewer: seconds a connection may stay silent (event streams are exempt). */
export const VIEWER_IDLE_SECONDS = 30;
/** Viewer: random bytes in its token (printed as twice as many hex digits). */
export const VIEWER_TOKEN_BYTES = 32;
/** Viewer: the largest runtime-directory file `repl-mcp viewer` reads. */
export const VIEWER_FILE_MAX_BYTES = 8_192;

// Contained workers (--sandbox; docs/sandbox.md)
/** The largest policy file --sandbox reads. */
export const SANDBOX_POLICY_MAX_BYTES = 256 * 1024;
/** What a cell's result lists of what the sandbox refused it (sandbox_denials), at most. */
export const SANDBOX_DENIALS_MAX = 16;
/** The longest path or host kept in one denial; a longer one is cut. */
export const SANDBOX_DENIAL_TEXT_MAX_CHARS = 512;
/** Bytes of a proxied connection's first request the front reads to learn its destination. */
export const SANDBOX_REQUEST_HEAD_MAX_BYTES = 16_384;
/** A proxied connection that names no destination within this is closed. */
export const SANDBOX_REQUEST_HEAD_TIMEOUT_MS = 30_000;
/** Bytes a proxied connection may hold unsent toward a slow reader before its other side is paused. */
export const SANDBOX_RELAY_BACKLOG_BYTES = 1_048_576;
/** The start-up probe (a contained `exit 0`) must have finished within this. */
export const SANDBOX_PROBE_TIMEOUT_MS = 15_000;
/** Longest path of the sandbox's directory in the temporary directory, leaving room for a socket's name (108 bytes in all). */
export const SANDBOX_SOCKET_PATH_MAX_BYTES = 64;
/** The buffer of the sandbox's socat relays (socat's own default is 8 KiB). */
export const SOCAT_BUFFER_BYTES = 131_072;
