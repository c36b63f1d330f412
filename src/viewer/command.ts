// `repl-mcp viewer`: the viewers of this user's running servers, from their address files, newest last;
// `--open` hands the newest to the browser. Listing goes to stdout (it is asked for); problems to stderr.
import type { ViewerOptions } from "../cli/command.ts";
import { openInBrowser } from "../guardian/open-url.ts";
import { NAME } from "../version.ts";
import { listAddresses } from "./address-file.ts";

export async function viewerCommand(options: ViewerOptions): Promise<number> {
  const viewers = listAddresses();
  if (viewers.length === 0) {
    process.stderr.write(
      `${NAME}: no viewer is running; start the server with --viewer (or REPL_MCP_VIEWER=1 in its environment)\n`,
    );
    return 1;
  }
  if (options.open) {
    const newest = viewers[viewers.length - 1] as (typeof viewers)[number];
    const { command, code } = await openInBrowser(newest.url);
    if (code === 0) return 0;
    process.stderr.write(
      `${NAME}: ${command} ${code === null ? "could not be started" : `exited with status ${code}`}; ` +
        `open this URL yourself:\n${newest.url}\n`,
    );
    return 1;
  }
  const rows = viewers.map((viewer) => [
    viewer.project,
    String(viewer.pid),
    new Date(viewer.started_at).toISOString().replace(/\.\d+Z$/, "Z"),
    viewer.url,
  ]);
  const header = ["PROJECT", "PID", "STARTED", "URL"];
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]?.length ?? 0)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join("  ");
  process.stdout.write(`${[header, ...rows].map(line).join("\n")}\n`);
  return 0;
}
