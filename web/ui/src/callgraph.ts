// The call graph drawn by Graphviz (its WebAssembly build, loaded on first use): one node per
// function, sized by total time and colored by self time, edges labeled with call counts.
import type { GraphEntry, GraphLine } from "./api";
import { count, isOverhead } from "./format";

const kMaxNodes = 40; // the busiest functions; a larger graph is unreadable at 1280 px

const quote = (s: string) => `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

// Self time as a color from pale yellow (none) to red (all of it).
function heat(fraction: number): string {
  const f = Math.max(0, Math.min(1, fraction));
  const hue = 55 - 55 * f;
  return `${(hue / 360).toFixed(3)} ${(0.25 + 0.6 * f).toFixed(3)} 1.000`;
}

// Calls as gprof's call graph counts them: from elsewhere, "+" the function's calls of itself
// (a sum would disagree with the flat profile, which counts only the first).
export const calledText = (e: GraphEntry) =>
  count(e.called) + (e.self_calls ? "+" + count(e.self_calls) : "");

// A caller's or callee's line: the calls along this arc "/" all the calls of the callee.
export const arcCallsText = (l: GraphLine) => `${count(l.count)}/${count(l.of)}`;

// A line gprof prints with its count alone (no times, no "/"): a call of the entry's function
// by itself, or between two members of its cycle.
export const withinCycle = (e: GraphEntry, l: GraphLine) =>
  l.index === e.index || (l.cycle !== null && l.cycle === e.cycle);

// A function as gprof names it in the call graph: "ping <cycle 1> [6]".
export const gprofName = (name: string, index: number, cycle?: number | null) =>
  `${name}${cycle ? ` <cycle ${cycle}>` : ""} [${index}]`;

// The called column as gprof prints it: no separators, "+" the calls of itself.
// A function called neither from elsewhere nor by itself (a root) has the column blank.
export const gprofCalled = (called: number, selfCalls: number) =>
  selfCalls ? `${called}+${selfCalls}` : called ? String(called) : "";

// printf's "%.Nf": the double's exact value rounded, a tie to even (toFixed rounds a tie away
// from zero: 0.125 is "0.13" there and "0.12" in gprof's text).
export function printfFixed(x: number, digits: number): string {
  const exact = Math.abs(x).toFixed(100);
  const dot = exact.indexOf(".");
  const tie = /^50*$/.test(exact.slice(dot + 1 + digits));
  const kept = exact.slice(0, digits ? dot + 1 + digits : dot);
  if (!tie || Number(kept[kept.length - 1]) % 2 === 1) return x.toFixed(digits);
  return (x < 0 && Number(kept) !== 0 ? "-" : "") + kept;
}

// The cells gprof prints for a caller's or callee's line: self, children, called, name.
export function gprofLineCells(e: GraphEntry, l: GraphLine): [string, string, string, string] {
  const name = gprofName(l.name, l.index, l.cycle);
  if (withinCycle(e, l)) return ["", "", String(l.count), name];
  return [
    printfFixed(l.self_seconds, 2),
    printfFixed(l.children_seconds, 2),
    `${l.count}/${l.of}`,
    name,
  ];
}

// pprof's filters on the graph, regular expressions on function names (empty: off): focus
// keeps the matching functions with their callers and callees, ignore drops the matching ones
// with what is called only through them, hide drops the matching ones alone.
export interface GraphFilter {
  focus?: string;
  ignore?: string;
  hide?: string;
}

// The functions reached from a root (no caller but itself, or called spontaneously) along arcs
// that do not enter a function `ignored` matches.
function reachedAvoiding(entries: GraphEntry[], ignored: RegExp): Set<string> {
  const byName = new Map(entries.map((e) => [e.name, e]));
  const isRoot = (e: GraphEntry) =>
    e.spontaneous || !(e.parents ?? []).some((p) => p.index !== e.index);
  const todo = entries.filter((e) => isRoot(e) && !ignored.test(e.name)).map((e) => e.name);
  const reached = new Set(todo);
  for (let name = todo.pop(); name !== undefined; name = todo.pop()) {
    for (const c of byName.get(name)?.children ?? []) {
      if (reached.has(c.name) || ignored.test(c.name)) continue;
      reached.add(c.name);
      todo.push(c.name);
    }
  }
  return reached;
}

export function callGraphDot(
  entries: GraphEntry[],
  totalSeconds: number,
  selected?: string,
  filter: GraphFilter = {},
): string {
  const re = (text?: string) => (text?.trim() ? new RegExp(text.trim()) : undefined);
  const focus = re(filter.focus);
  const ignore = re(filter.ignore);
  const hide = re(filter.hide);
  const near = new Set<string>();
  for (const e of entries) {
    if (!focus?.test(e.name)) continue;
    near.add(e.name);
    for (const l of [...(e.parents ?? []), ...(e.children ?? [])]) near.add(l.name);
  }
  const kept = ignore ? reachedAvoiding(entries, ignore) : undefined;
  const functions = entries.filter(
    (e) =>
      (e.cycle === null || !e.members) &&
      (!focus || near.has(e.name)) &&
      (!kept || kept.has(e.name)) &&
      !hide?.test(e.name),
  );
  const shown = [...functions]
    .sort((a, b) => b.percent - a.percent || b.called - a.called)
    .slice(0, kMaxNodes);
  const names = new Set(shown.map((e) => e.name));
  const lines = [
    "digraph callgraph {",
    // Courier: Graphviz sizes boxes by its metrics, and every monospace font has the same.
    '  graph [rankdir=LR, bgcolor="transparent", pad=0.2, nodesep=0.35, ranksep=0.5, fontname="Courier"];',
    '  node [shape=box, style="rounded,filled", fontname="Courier", color="#555555", margin="0.15,0.06"];',
    '  edge [fontname="Courier", fontsize=12, color="#666666", fontcolor="#1f2328"];',
  ];
  for (const e of shown) {
    const self = totalSeconds > 0 ? e.self_seconds / totalSeconds : 0;
    const size = 10 + Math.round(Math.sqrt(e.percent) * 0.6);
    const overhead = isOverhead(e.name);
    lines.push(
      `  ${quote(e.name)} [id=${quote("fn-" + e.index)}, label=${quote(
        `${e.name}\n${e.percent.toFixed(1)} % total, ${(self * 100).toFixed(1)} % self\n${calledText(e)} calls`,
      )}, fontsize=${size}, fillcolor=${quote(overhead ? "0.0 0.0 0.88" : heat(self))}${
        overhead ? ', style="rounded,filled,dashed"' : ""
      }${e.name === selected ? ', penwidth=3, color="#1d4ed8"' : ""}, tooltip=${quote(e.name)}];`,
    );
  }
  for (const e of shown) {
    for (const c of e.children ?? []) {
      if (!names.has(c.name)) continue;
      const width = 1 + Math.min(4, Math.log10(Math.max(1, c.count)));
      lines.push(
        `  ${quote(e.name)} -> ${quote(c.name)} [label=${quote(String(c.count))}, penwidth=${width.toFixed(2)}];`,
      );
    }
  }
  lines.push("}");
  return lines.join("\n");
}

let viz: Promise<{ renderSVGElement(dot: string): SVGSVGElement }> | null = null;

export async function renderCallGraph(dot: string): Promise<SVGSVGElement> {
  viz ??= import("@viz-js/viz").then((m) => m.instance());
  return (await viz).renderSVGElement(dot);
}
