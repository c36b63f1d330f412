// Every size, count and duration the product enforces, named with its unit.

export const CODE_MAX_BYTES = 262_144;
export const FRAME_MAX_BYTES = 1_048_576;
export const MCP_MESSAGE_MAX_BYTES = 1_048_576;
export const GUARDIAN_SPEC_MAX_BYTES = 1_048_576;

export const TOOL_RESULT_MAX_BYTES = 1_000_000;
export const TEXT_PREVIEW_MAX_BYTES = 8_192;

export const STREAM_CAPTURE_MAX_BYTES = 50_000;
export const LIVE_STREAM_MAX_BYTES = 65_536;
export const NATIVE_STDERR_MAX_BYTES = 65_536;
export const RETURN_PREVIEW_MAX_BYTES = 20_000;
export const ERROR_TEXT_MAX_BYTES = 20_000;

export const TIMEOUT_MIN_SECONDS = 0.01;
export const TIMEOUT_MAX_SECONDS = 3_600;
export const TIMEOUT_DEFAULT_SECONDS = 120;

export const INTERRUPT_GRACE_MS = 2_000;
export const WORKER_READY_TIMEOUT_MS = 10_000;
export const FRAME_WRITE_TIMEOUT_MS = 5_000;
export const WRITER_QUEUE_FRAMES = 4;
export const STDERR_DRAIN_BARRIER_MS = 1_000;
export const WORKER_EXIT_WAIT_MS = 3_000;
export const SHUTDOWN_RUNS_WAIT_MS = 5_000;

export const HISTORY_RUNS = 64;
export const RPC_CONCURRENCY = 64;

export const RSS_DEFAULT_MIB = 2_048;
export const RSS_SAMPLE_INTERVAL_MS = 250;

export const BUSY_WAIT_WHILE_CANCELLING_MS = 3_500;
export const INVENTORY_TIMEOUT_SECONDS = 5;
export const ARGV_MAX_ITEMS = 128;
export const ARGV_MAX_BYTES = 32_768;

export const SESSIONS_MAX = 32;
export const SESSION_OPENS_MAX = 4;
export const SESSION_NAME_MAX_BYTES = 128;
export const PROBE_TIMEOUT_MS = 10_000;
export const PROBE_OUTPUT_MAX_BYTES = 4_096;
export const SESSION_CLOSE_WAIT_MS = 5_000;
