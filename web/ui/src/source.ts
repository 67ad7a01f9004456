// A function's source view (pprof's weblist as the model): each line with its samples, share,
// 95 % interval and calls, hot lines marked, and with the disassembly toggle each line's
// instructions under it. The rows are made by sourceRows (pure, tested) and drawn by sourceView.
import type { Annotation, AnnotatedFunction } from "./api";
import { h } from "./dom";
import { count, intervalTitle, percent, plusMinus } from "./format";

export interface SourceRow {
  kind: "line" | "instruction";
  label: string; // "154" (or "board.c:48" from another file), or "146a" for an instruction
  text: string;
  samples: number;
  share: number;
  interval: [number, number];
  calls: number;
  heat: number; // 0..1: the row's samples against the function's busiest line
}

const fileName = (path: string) => path.slice(path.lastIndexOf("/") + 1);

// The function's rows in order; with `instructions`, each line's instructions after it. A
// search keeps the lines whose text or number holds it (with their instructions), and the
// instructions that hold it.
export function sourceRows(f: AnnotatedFunction, instructions: boolean, search = ""): SourceRow[] {
  const busiest = Math.max(
    1,
    ...f.lines.map((l) => l.samples),
    ...f.instructions.map((i) => i.samples),
  );
  const needle = search.trim().toLowerCase();
  type Instruction = AnnotatedFunction["instructions"][number];
  const matches = (i: Instruction) => `${i.address} ${i.text}`.toLowerCase().includes(needle);
  const instructionRow = (i: Instruction): SourceRow => ({
    kind: "instruction",
    label: i.address.replace(/^0x/, ""),
    text: i.text,
    ...numbers(i),
    heat: i.samples / busiest,
  });
  const rows: SourceRow[] = [];
  for (const l of f.lines) {
    const label = l.file === f.file ? String(l.line) : `${fileName(l.file)}:${l.line}`;
    const text = l.text ?? "";
    const own = f.instructions.filter((i) => i.file === l.file && i.line === l.line);
    const lineMatches = !needle || `${label} ${text}`.toLowerCase().includes(needle);
    const shown = instructions ? own.filter((i) => lineMatches || matches(i)) : [];
    if (!lineMatches && shown.length === 0) continue;
    rows.push({ kind: "line", label, text, ...numbers(l), heat: l.samples / busiest });
    rows.push(...shown.map(instructionRow));
  }
  // Instructions no line covers (no DWARF): after the lines, on their own.
  if (instructions)
    rows.push(
      ...f.instructions.filter((i) => i.line === 0 && (!needle || matches(i))).map(instructionRow),
    );
  return rows;
}

function numbers(x: { samples: number; share: number; interval: [number, number]; calls: number }) {
  return { samples: x.samples, share: x.share, interval: x.interval, calls: x.calls };
}

export function sourceView(a: Annotation, instructions: boolean, search: string): HTMLElement {
  if (a.functions.length === 0) return h("p", { class: "muted" }, "No such function.");
  return h(
    "div",
    {},
    a.functions.map((f) =>
      h(
        "div",
        { class: "source-function" },
        h(
          "p",
          {},
          h("strong", { class: "mono" }, f.name),
          ` in ${f.file || "(no source lines)"} · ${count(f.samples)} samples (${percent(f.share)}) · ${count(f.calls)} calls made`,
          f.source_shown || !f.file
            ? ""
            : h(
                "span",
                { class: "muted" },
                " · the source file is not under a source root ([sources] roots)",
              ),
          f.truncated ? h("span", { class: "muted" }, " · only its first 256 KiB decoded") : "",
        ),
        h(
          "table",
          { class: "source" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["samples", "% total", "±", "calls", "line", "source"].map((c) =>
                h("th", { scope: "col" }, c),
              ),
            ),
          ),
          h(
            "tbody",
            {},
            sourceRows(f, instructions, search).map((r) =>
              h(
                "tr",
                {
                  class: [r.kind, r.heat >= 0.5 ? "hot" : r.samples ? "warm" : ""].join(" ").trim(),
                  style: r.samples ? `--heat: ${r.heat.toFixed(3)}` : undefined,
                },
                h("td", { class: "num" }, r.samples ? count(r.samples) : "."),
                h("td", { class: "num" }, r.samples ? percent(r.share) : ""),
                h(
                  "td",
                  { class: "num interval", title: intervalTitle(r.interval, "%") },
                  r.samples ? plusMinus(r.interval) : "",
                ),
                h("td", { class: "num" }, r.calls ? count(r.calls) : ""),
                h("td", { class: "num mono" }, r.label),
                h("td", { class: "mono code" }, r.text),
              ),
            ),
          ),
        ),
      ),
    ),
  );
}
