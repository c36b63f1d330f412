// The sandbox runtime looks for its helper programs beside its own files, which a compiled binary does
// not have (its modules live in a virtual filesystem), and would then ask npm where a global install is.
// So the helpers travel inside the binary and are written out like the worker's source: a private,
// content-addressed copy each (fs/cached-copy.ts), whose paths the runtime is given.
import { readFileSync } from "node:fs";
import JAVA_AGENT from "@anthropic-ai/sandbox-runtime/vendor/java-proxy-agent/srt-proxy-agent.jar" with {
  type: "file",
};
import SECCOMP_ARM64 from "@anthropic-ai/sandbox-runtime/vendor/seccomp/arm64/apply-seccomp" with {
  type: "file",
};
import SECCOMP_X64 from "@anthropic-ai/sandbox-runtime/vendor/seccomp/x64/apply-seccomp" with {
  type: "file",
};
import { PRIVATE_PROGRAM_MODE } from "../fs/atomic.ts";
import { cachedCopy } from "../fs/cached-copy.ts";
import { SOCAT_BUFFER_BYTES } from "../limits.ts";

/**
 * The seccomp helper for this machine (it refuses Unix sockets and new user namespaces to everything the
 * worker starts), or undefined where the runtime has none.
 */
export function applySeccompProgram(): string | undefined {
  const embedded =
    process.arch === "x64" ? SECCOMP_X64 : process.arch === "arm64" ? SECCOMP_ARM64 : undefined;
  if (embedded === undefined || process.platform !== "linux") return undefined;
  return cachedCopy("apply-seccomp", "", readFileSync(embedded), PRIVATE_PROGRAM_MODE);
}

/** The JVM agent that points Java programs in the sandbox at its proxy. */
export function javaAgentJar(): string {
  return cachedCopy("srt-proxy-agent", ".jar", readFileSync(JAVA_AGENT));
}

/**
 * The `socat` the runtime runs, both as its bridge on this host and as the relays inside each sandbox.
 * `setpriv --pdeathsig TERM` makes each one end when the process that started it ends: a bridge started
 * by a server that is killed (SIGKILL) would otherwise listen for ever, and socat removes its socket
 * when it is told to stop. Without setpriv the real socat is used and the doctor says what is lost.
 * Its buffer is SOCAT_BUFFER_BYTES rather than socat's 8 KiB: every proxied byte crosses a relay inside
 * the sandbox, and 8 KiB reads cost a download through the sandbox about a quarter of its speed.
 */
export function socatProgram(socat: string, setpriv: string | undefined): string {
  const line = setpriv
    ? `exec ${quote(setpriv)} --pdeathsig TERM -- ${quote(socat)} -b ${SOCAT_BUFFER_BYTES} "$@"`
    : `exec ${quote(socat)} -b ${SOCAT_BUFFER_BYTES} "$@"`;
  return cachedCopy(
    "socat",
    ".sh",
    Buffer.from(`#!/bin/sh\n# repl-mcp: socat for the sandbox runtime\n${line}\n`),
    PRIVATE_PROGRAM_MODE,
  );
}

/** One shell word. */
export function quote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}
