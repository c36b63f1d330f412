// A page receiving the viewer's event stream, in a process of its own (as a browser tab would be): it reads
// everything as it comes; when its stdin closes it prints {"bytes", "events"} and exits.
const [origin, cookie] = process.argv.slice(2) as [string, string];
const got = { bytes: 0, events: 0 };
const abort = new AbortController();
const reading = (async () => {
  const response = await fetch(`${origin}/events`, { headers: { cookie }, signal: abort.signal });
  const decoder = new TextDecoder();
  for await (const chunk of response.body as ReadableStream<Uint8Array>) {
    got.bytes += chunk.length;
    got.events += (decoder.decode(chunk).match(/\n\n/g) ?? []).length;
  }
})().catch(() => undefined);
for await (const _ of Bun.stdin.stream()) {
  // Only its end matters.
}
abort.abort();
await reading;
process.stdout.write(`${JSON.stringify(got)}\n`);

export {};
