// Opening a URL in the user's browser (`repl-mcp viewer --open`): the desktop's own opener, detached, so
// the command returns while the browser keeps running. Here because only guardian/ starts processes.
import { inheritableEnv } from "./env.ts";

/** Resolves with the opener's exit code (null when it could not be started at all). */
export async function openInBrowser(url: string): Promise<{ command: string; code: number | null }> {
  const command = process.platform === "darwin" ? "open" : "xdg-open";
  try {
    const proc = Bun.spawn([command, url], {
      stdio: ["ignore", "ignore", "inherit"],
      env: inheritableEnv(),
    });
    return { command, code: await proc.exited };
  } catch {
    return { command, code: null };
  }
}
