// Runs the whole suite with bun's test runner and ends with the plain `N passed, N failed` line that CI
// reads. bun prints its summary on stderr; it is passed through and parsed. A file that fails to load
// counts as a failure. The exit code is bun's.
export {};

const args = process.argv.slice(2);
// bun 1.4 ignores bunfig.toml's [test] timeout, so the default per-test limit is given here.
const proc = Bun.spawn([process.execPath, "test", "--timeout", "60000", ...args], {
  stdout: "inherit",
  stderr: "pipe",
});

let tail = "";
const decoder = new TextDecoder();
for await (const chunk of proc.stderr) {
  process.stderr.write(chunk);
  tail = (tail + decoder.decode(chunk, { stream: true })).slice(-20_000);
}
const code = await proc.exited;

const count = (label: string) => Number(tail.match(new RegExp(`^\\s*(\\d+) ${label}\\s*$`, "m"))?.[1] ?? 0);
const passed = count("pass");
const failed = count("fail") + count("errors?");
// bun exits nonzero without a summary when nothing could run at all: count that as one failure.
const reported = failed === 0 && code !== 0 ? 1 : failed;
console.log(`${passed} passed, ${reported} failed`);
process.exit(code);
