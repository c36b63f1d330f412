// Artifacts as MCP resources: one URI per artifact that names its owner session, so a resource read is
// checked against ownership exactly like a tool call naming that session.
const PREFIX = "repl-mcp://artifacts/";
const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
const PATTERN = new RegExp(`^${PREFIX}(${UUID})/(${UUID})$`);

export function artifactUri(sessionId: string, id: string): string {
  return `${PREFIX}${sessionId}/${id}`;
}

export function parseArtifactUri(uri: string): { sessionId: string; id: string } | undefined {
  const match = PATTERN.exec(uri);
  return match ? { sessionId: match[1] as string, id: match[2] as string } : undefined;
}
