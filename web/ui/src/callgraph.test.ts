import { describe, expect, it } from "vitest";
import type { GraphEntry, GraphLine } from "./api";
import {
  arcCallsText,
  calledText,
  callGraphDot,
  gprofCalled,
  gprofLineCells,
  printfFixed,
} from "./callgraph";

const line = (name: string, index: number, count: number, of: number): GraphLine => ({
  name,
  index,
  self_seconds: 0,
  children_seconds: 0,
  count,
  of,
  cycle: null,
});

const entry = (e: Partial<GraphEntry> & Pick<GraphEntry, "name" | "index">): GraphEntry => ({
  cycle: null,
  percent: 0,
  self_seconds: 0,
  children_seconds: 0,
  called: 0,
  self_calls: 0,
  ...e,
});

// A node's statement (its label spans lines).
const node = (dot: string, name: string) => {
  const m = new RegExp(`^ {2}"${name}" \\[[^;]*\\];$`, "m").exec(dot);
  if (!m) throw new Error(`no node ${name}`);
  return m[0];
};

describe("calledText", () => {
  it("prints calls from elsewhere, + the calls of itself, as gprof does", () => {
    expect(calledText(entry({ name: "work", index: 2, called: 1000 }))).toBe("1,000");
    expect(calledText(entry({ name: "fib", index: 3, called: 3, self_calls: 12 }))).toBe("3+12");
  });
});

describe("arcCallsText", () => {
  it("prints an arc's calls over all the callee's calls", () => {
    expect(arcCallsText(line("work", 2, 1500, 3000))).toBe("1,500/3,000");
    expect(arcCallsText(line("init", 4, 1, 1))).toBe("1/1");
  });
});

describe("callGraphDot", () => {
  const main = entry({
    name: "main",
    index: 1,
    percent: 100,
    self_seconds: 0,
    children_seconds: 10,
    called: 1,
    children: [line("work", 2, 10, 10), line("not_shown", 9, 5, 5)],
  });
  const work = entry({ name: "work", index: 2, percent: 81, self_seconds: 10, called: 10 });

  it("draws one node per function, labelled with its shares and calls", () => {
    const dot = callGraphDot([main, work], 10);
    const lines = dot.split("\n");
    expect(lines[0]).toBe("digraph callgraph {");
    expect(lines.at(-1)).toBe("}");
    // main: no self time (pale yellow), total 100 % (font 10 + round(sqrt(100) * 0.6)).
    expect(dot).toContain(
      '"main" [id="fn-1", label="main\n100.0 % total, 0.0 % self\n1 calls", fontsize=16, fillcolor="0.153 0.250 1.000", tooltip="main"];',
    );
    // work: all the self time (red), 81 % (font 10 + round(9 * 0.6) = 15).
    expect(dot).toContain(
      '"work" [id="fn-2", label="work\n81.0 % total, 100.0 % self\n10 calls", fontsize=15, fillcolor="0.000 0.850 1.000", tooltip="work"];',
    );
  });

  it("draws edges between drawn functions only, with their call counts", () => {
    const dot = callGraphDot([main, work], 10);
    expect(dot).toContain('  "main" -> "work" [label="10", penwidth=2.00];');
    expect(dot).not.toContain("not_shown");
  });

  it("marks the selected function and the profiler's own", () => {
    const mcount = entry({ name: "__gnu_mcount_nc", index: 5, percent: 5, self_seconds: 0.5 });
    const dot = callGraphDot([main, work, mcount], 10, "work");
    expect(node(dot, "work")).toContain(', penwidth=3, color="#1d4ed8", tooltip="work"];');
    expect(node(dot, "__gnu_mcount_nc")).toContain(
      'fillcolor="0.0 0.0 0.88", style="rounded,filled,dashed", tooltip',
    );
    expect(node(dot, "main")).not.toContain("penwidth");
  });

  it("leaves out cycles as a whole and keeps the 40 busiest functions", () => {
    const cycle = entry({
      name: "<cycle 1 as a whole>",
      index: 50,
      cycle: 1,
      percent: 99,
      members: [
        { name: "a", index: 51, called: 1, self_calls: 0, self_seconds: 0, children_seconds: 0 },
      ],
    });
    const many = Array.from({ length: 45 }, (_, i) =>
      entry({ name: `f${i}`, index: 100 + i, percent: i }),
    );
    const dot = callGraphDot([cycle, ...many], 10);
    expect(dot).not.toContain("cycle 1");
    const nodes = [...dot.matchAll(/^ {2}"(f\d+)" \[/gm)].map((m) => m[1]);
    expect(nodes).toHaveLength(40);
    expect(nodes[0]).toBe("f44");
    expect(nodes).not.toContain("f4");
    expect(nodes).toContain("f5");
  });

  it("escapes quotes and backslashes in names", () => {
    const dot = callGraphDot([entry({ name: 'op"\\', index: 7, percent: 1 })], 1);
    expect(dot).toContain('  "op\\"\\\\" [id="fn-7"');
  });
});

describe("gprof's call-graph lines", () => {
  const entry = (index: number, cycle: number | null) => ({ index, cycle }) as GraphEntry;
  const arc = (index: number, cycle: number | null, count: number, of: number) => ({
    index,
    cycle,
    count,
    of,
    name: `f${index}`,
    self_seconds: 2,
    children_seconds: 0.125,
  });
  it("prints a call within the entry's cycle, or of itself, by its count alone", () => {
    expect(gprofLineCells(entry(6, 1), arc(8, 1, 400, 200))).toEqual([
      "",
      "",
      "400",
      "f8 <cycle 1> [8]",
    ]);
    expect(gprofLineCells(entry(7, null), arc(7, null, 800, 200))).toEqual([
      "",
      "",
      "800",
      "f7 [7]",
    ]);
  });
  it("prints other lines with times as printf does and count/of without separators", () => {
    expect(gprofLineCells(entry(1, null), arc(6, 1, 2000, 2000))).toEqual([
      "2.00",
      "0.12",
      "2000/2000",
      "f6 <cycle 1> [6]",
    ]);
  });
  it("rounds a tie to even as printf does, and otherwise as toFixed", () => {
    expect(printfFixed(0.125, 2)).toBe("0.12");
    expect(printfFixed(0.375, 2)).toBe("0.38");
    expect(printfFixed(2.25, 1)).toBe("2.2");
    expect(printfFixed(0.1, 2)).toBe("0.10");
    expect(printfFixed(89.1891891891892, 1)).toBe("89.2");
    expect(printfFixed(0, 2)).toBe("0.00");
  });
  it("writes the called column with its self calls after a plus", () => {
    expect(gprofCalled(200, 800)).toBe("200+800");
    expect(gprofCalled(1200, 0)).toBe("1200");
    expect(gprofCalled(0, 0)).toBe("");
  });
});

describe("the drawing's focus and hide", () => {
  const chain = [
    entry({ name: "main", index: 1, children: [line("alpha", 2, 1, 1)] }),
    entry({
      name: "alpha",
      index: 2,
      parents: [line("main", 1, 1, 1)],
      children: [line("beta", 3, 2, 2)],
    }),
    entry({
      name: "beta",
      index: 3,
      parents: [line("alpha", 2, 2, 2)],
      children: [line("gamma", 4, 5, 5)],
    }),
    entry({ name: "gamma", index: 4, parents: [line("beta", 3, 5, 5)] }),
  ];
  const nodes = (dot: string) => [...dot.matchAll(/^ {2}"(\w+)" \[/gm)].map((m) => m[1]).sort();
  it("focus keeps the matches with their callers and callees; hide drops the matches", () => {
    expect(nodes(callGraphDot(chain, 1))).toEqual(["alpha", "beta", "gamma", "main"]);
    expect(nodes(callGraphDot(chain, 1, undefined, { focus: "^beta$" }))).toEqual([
      "alpha",
      "beta",
      "gamma",
    ]);
    const hidden = callGraphDot(chain, 1, undefined, { hide: "^(alpha|gamma)$" });
    expect(nodes(hidden)).toEqual(["beta", "main"]);
    expect(hidden).not.toContain("->");
  });
  it("ignore drops the matches and what is called only through them", () => {
    expect(nodes(callGraphDot(chain, 1, undefined, { ignore: "^beta$" }))).toEqual([
      "alpha",
      "main",
    ]);
    // gamma is also called by main directly: it stays when beta's way to it is ignored.
    const diamond = chain.map((e) =>
      e.name === "main"
        ? { ...e, children: [...(e.children ?? []), line("gamma", 4, 1, 6)] }
        : e.name === "gamma"
          ? { ...e, parents: [...(e.parents ?? []), line("main", 1, 1, 6)] }
          : e,
    );
    expect(nodes(callGraphDot(diamond, 1, undefined, { ignore: "^beta$" }))).toEqual([
      "alpha",
      "gamma",
      "main",
    ]);
    expect(nodes(callGraphDot(diamond, 1, undefined, { ignore: "^main$" }))).toEqual([]);
  });
});
