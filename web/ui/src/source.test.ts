import { describe, expect, it } from "vitest";
import type { AnnotatedFunction } from "./api";
import { sourceRows } from "./source";

const counted = (samples: number, calls = 0) => ({
  samples,
  share: samples / 10,
  interval: [samples / 20, samples / 5] as [number, number],
  calls,
});

const fn: AnnotatedFunction = {
  name: "hot",
  address: "0x1000",
  end: "0x1010",
  file: "/src/hot.c",
  source_shown: true,
  truncated: false,
  ...counted(100, 4),
  lines: [
    { file: "/src/hot.c", line: 6, text: "void hot(int n) {", ...counted(10) },
    { file: "/src/hot.c", line: 7, text: "  sink ^= n;", ...counted(80) },
    { file: "/src/inline.h", line: 3, text: "  return x;", ...counted(10, 4) },
  ],
  instructions: [
    {
      address: "0x1000",
      size: 2,
      text: "push {r4, lr}",
      file: "/src/hot.c",
      line: 6,
      ...counted(10),
    },
    {
      address: "0x1002",
      size: 2,
      text: "eors r3, r4",
      file: "/src/hot.c",
      line: 7,
      ...counted(80),
    },
    {
      address: "0x1004",
      size: 4,
      text: "bl 0x2000",
      file: "/src/inline.h",
      line: 3,
      ...counted(10, 4),
    },
  ],
};

describe("the source view's rows", () => {
  it("lists lines, heat against the busiest line, other files by name", () => {
    const rows = sourceRows(fn, false);
    expect(rows.map((r) => r.label)).toEqual(["6", "7", "inline.h:3"]);
    expect(rows[1].heat).toBe(1);
    expect(rows[0].heat).toBeCloseTo(0.125);
    expect(rows[2].calls).toBe(4);
  });
  it("puts each line's instructions under it with the disassembly on", () => {
    const rows = sourceRows(fn, true);
    expect(rows.map((r) => `${r.kind}:${r.label}`)).toEqual([
      "line:6",
      "instruction:1000",
      "line:7",
      "instruction:1002",
      "line:inline.h:3",
      "instruction:1004",
    ]);
  });
  it("searches lines and instructions", () => {
    expect(sourceRows(fn, false, "sink").map((r) => r.label)).toEqual(["7"]);
    // An instruction's match keeps its line, with only the matching instruction.
    expect(sourceRows(fn, true, "bl 0x").map((r) => r.label)).toEqual(["inline.h:3", "1004"]);
  });
});
