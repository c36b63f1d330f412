// Keep durations (python_session_open's keep, --keep-sessions): one number and one unit, refused with
// a message that names the value, and the limit when it is over it.
import { expect, test } from "bun:test";
import { formatDuration, keepSeconds, parseDuration } from "../../src/parking/duration.ts";

test("a duration is a whole number and one unit, or 0", () => {
  expect(parseDuration("90m")).toBe(5_400);
  expect(parseDuration("8h")).toBe(28_800);
  expect(parseDuration("7d")).toBe(604_800);
  expect(parseDuration(" 30s ")).toBe(30);
  expect(parseDuration("0")).toBe(0);
  for (const bad of ["", "8", "8x", "1.5h", "-1h", "8 h", "h", "1h30m", "99999999999d"]) {
    expect(() => parseDuration(bad)).toThrow(`"${bad}" is not a duration`);
  }
});

test("durations are shown in their largest exact unit", () => {
  expect([28_800, 5_400, 604_800, 45, 0].map(formatDuration)).toEqual(["8h", "90m", "7d", "45s", "0"]);
});

test("a keep over the maximum names the value and the maximum", () => {
  expect(keepSeconds("2h", 7_200)).toBe(7_200);
  expect(() => keepSeconds("3h", 7_200)).toThrow('keep "3h" is longer than this server allows (2h');
  expect(() => keepSeconds("soon", 7_200)).toThrow('"soon" is not a duration');
});
