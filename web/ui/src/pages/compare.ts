// Two sessions side by side: per function, self % and calls in each and the difference
// (B − A), largest change in self time first.
import { api, type Profile } from "../api";
import { count, isOverhead, percent, signed, signedCount } from "../format";
import { h, link, replace } from "../dom";

export async function comparePage(main: HTMLElement, params: URLSearchParams) {
  const a = Number(params.get("a"));
  const b = Number(params.get("b"));
  if (!a || !b) {
    replace(main, h("h1", {}, "Compare"), h("p", {}, "Pick two sessions on the ", link("/sessions", "Sessions"), " page."));
    return;
  }
  const [sa, sb, pa, pb] = await Promise.all([api.session(a), api.session(b), api.profile(a), api.profile(b)]);
  const rows = diff(pa, pb);
  replace(
    main,
    h("h1", {}, `Compare session ${a} with ${b}`),
    h("p", { class: "meta" }, "A: ", link(`/sessions/${a}`, `#${a} ${sa.board}`), ` (${count(pa.total_samples)} samples) · B: `, link(`/sessions/${b}`, `#${b} ${sb.board}`), ` (${count(pb.total_samples)} samples)`),
    h(
      "table",
      { class: "data", id: "compare-table" },
      h(
        "thead",
        {},
        h("tr", {}, h("th", { scope: "col", rowspan: 2 }, "Function"), h("th", { scope: "colgroup", colspan: 3 }, "Self %"), h("th", { scope: "colgroup", colspan: 3 }, "Calls")),
        h("tr", {}, ...["A", "B", "B − A", "A", "B", "B − A"].map((t) => h("th", { scope: "col", class: "num" }, t))),
      ),
      h(
        "tbody",
        {},
        rows.map((r) =>
          h(
            "tr",
            { "data-function": r.name, class: isOverhead(r.name) ? "overhead" : undefined },
            h("th", { scope: "row", class: "mono" }, r.name, isOverhead(r.name) ? h("span", { class: "tag" }, "overhead") : ""),
            h("td", { class: "num" }, r.selfA === null ? "—" : percent(r.selfA)),
            h("td", { class: "num" }, r.selfB === null ? "—" : percent(r.selfB)),
            h("td", { class: `num ${tone(r.selfDiff)}`, "data-col": "self-diff" }, signed(r.selfDiff)),
            h("td", { class: "num" }, count(r.callsA)),
            h("td", { class: "num" }, count(r.callsB)),
            h("td", { class: `num ${tone(r.callsDiff)}`, "data-col": "calls-diff" }, signedCount(r.callsDiff)),
          ),
        ),
      ),
    ),
  );
}

// More time is worse: red; less: green.
const tone = (d: number) => (d > 0.005 ? "worse" : d < -0.005 ? "better" : "");

function diff(a: Profile, b: Profile) {
  const byName = (p: Profile) => new Map(p.flat.map((r) => [r.name, r]));
  const ma = byName(a);
  const mb = byName(b);
  const names = [...new Set([...ma.keys(), ...mb.keys()])];
  return names
    .map((name) => {
      const ra = ma.get(name);
      const rb = mb.get(name);
      const selfA = ra ? ra.percent : null;
      const selfB = rb ? rb.percent : null;
      const callsA = ra?.calls ?? 0;
      const callsB = rb?.calls ?? 0;
      return { name, selfA, selfB, selfDiff: (selfB ?? 0) - (selfA ?? 0), callsA, callsB, callsDiff: callsB - callsA };
    })
    .sort((x, y) => Math.abs(y.selfDiff) - Math.abs(x.selfDiff) || Math.abs(y.callsDiff) - Math.abs(x.callsDiff) || x.name.localeCompare(y.name));
}
