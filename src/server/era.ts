// The two protocol eras one server speaks: `legacy` is every revision up to 2025-11-25 (the initialize
// handshake), `modern` the stateless 2026-07-28 revision. Kept apart so the modules that vary by era
// (result styles, capabilities, tasks) sit below the server that picks one.
export type Era = "legacy" | "modern";
