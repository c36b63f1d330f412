// Kept sessions (docs/sessions.md, "Keeping a session"): how many workers are parked, waiting for a
// server to adopt them, how many a running server holds, and the memory they hold meanwhile. Nothing is
// started, adopted or stopped.
import { describe } from "../errors.ts";
import { ensurePrivateDirectory } from "../fs/private-dir.ts";
import { keptSessions } from "../parking/listing.ts";
import { parkingDirectory } from "../parking/place.ts";
import { note, ok, problem, type Section } from "./report.ts";

export function parkingSection(): Section {
  const directory = parkingDirectory();
  const title = "Kept sessions";
  let sessions: ReturnType<typeof keptSessions>;
  try {
    sessions = keptSessions();
    if (sessions.length > 0) ensurePrivateDirectory(directory, `The parked-sessions directory ${directory}`);
  } catch (error) {
    return {
      title,
      data: { directory },
      findings: [problem(describe(error), `Remove or fix ${directory} (it must be yours, mode 0700)`)],
    };
  }
  const parked = sessions.filter((session) => session.state === "parked");
  const held = sessions.filter((session) => session.state === "held");
  const ended = sessions.filter((session) => session.state === "ended");
  const bytes = [...parked, ...held].reduce((sum, session) => sum + (session.rss_bytes ?? 0), 0);
  const data = {
    directory,
    parked: parked.length,
    held: held.length,
    ended: ended.length,
    rss_bytes: bytes,
    sessions,
  };
  if (sessions.length === 0) return { title, data, findings: [ok("No kept sessions")] };
  const mib = (value: number) => `${(value / 1_048_576).toFixed(1)} MiB`;
  const parkedBytes = parked.reduce((sum, session) => sum + (session.rss_bytes ?? 0), 0);
  const findings = [];
  if (parked.length > 0) {
    findings.push(
      note(
        `${parked.length} parked session${parked.length === 1 ? "" : "s"} holding ${mib(parkedBytes)} of workers' memory ` +
          `(${parked.map((session) => `${session.name} until ${session.expires_at}`).join(", ")})`,
        "repl-mcp sessions lists them; repl-mcp sessions stop --all ends them now",
      ),
    );
  }
  if (held.length > 0) {
    findings.push(
      note(
        `${held.length} kept session${held.length === 1 ? "" : "s"} held by running servers (${mib(bytes - parkedBytes)})`,
      ),
    );
  }
  if (ended.length > 0) {
    findings.push(
      note(
        `${ended.length} kept session${ended.length === 1 ? "" : "s"} ended while parked: ${ended.map((session) => `${session.name} (${session.reason})`).join("; ")}`,
      ),
    );
  }
  return { title, data, findings };
}
