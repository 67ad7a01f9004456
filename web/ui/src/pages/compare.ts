// Two sessions side by side: per function, self % and calls in each and the difference
// (B − A), largest change in self time first. A warning says when they ran different firmware.
import { api, type Profile, type Session } from "../api";
import { count, isOverhead, percent, signed, signedCount } from "../format";
import { h, link, replace } from "../dom";
import { navigate } from "../router";

export async function comparePage(main: HTMLElement, params: URLSearchParams) {
  const a = Number(params.get("a"));
  const b = Number(params.get("b"));
  if (!a || !b) {
    const sessions = await api.sessions();
    replace(main, h("h1", {}, "Compare"), h("p", {}, "Two sessions side by side: per function, self time and calls in each and the difference."), compareForm(sessions));
    return;
  }
  const [sa, sb, pa, pb] = await Promise.all([api.session(a), api.session(b), api.profile(a), api.profile(b)]);
  const rows = diff(pa, pb);
  replace(
    main,
    h("h1", {}, `Compare session ${a} with ${b}`),
    h("p", { class: "meta" }, "A: ", link(`/sessions/${a}`, `#${a} ${sa.board}`), ` (${count(pa.total_samples)} samples) · B: `, link(`/sessions/${b}`, `#${b} ${sb.board}`), ` (${count(pb.total_samples)} samples)`),
    firmwareNote(sa, sb),
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
            // More or fewer calls is neither better nor worse: shown, not judged.
            h("td", { class: `num ${r.callsDiff ? "changed" : ""}`, "data-col": "calls-diff" }, signedCount(r.callsDiff)),
          ),
        ),
      ),
    ),
    h("h2", {}, "Compare other sessions"),
    compareForm(await api.sessions(), a, b),
  );
}

// Two sessions to compare, the newest two preselected ("this build against the previous one").
export function compareForm(sessions: Session[], a?: number, b?: number) {
  const pick = (name: "a" | "b", label: string, value: number | undefined) =>
    h("label", {}, label, " ", h("select", { name, id: `compare-${name}` }, sessions.map((s) => h("option", { value: s.id, selected: s.id === value }, `#${s.id} ${s.board}`))));
  const ids = sessions.map((s) => s.id);
  return h(
    "form",
    { class: "filters", id: "compare", onsubmit: (e: Event) => {
      e.preventDefault();
      const data = new FormData(e.target as HTMLFormElement);
      navigate(`/compare?a=${data.get("a")}&b=${data.get("b")}`);
    } },
    pick("a", "Compare", a ?? ids[ids.length - 2]),
    pick("b", "with", b ?? ids[ids.length - 1]),
    h("button", { type: "submit", disabled: sessions.length < 2 }, "Compare"),
  );
}

// What names a session's firmware: the ELF's build-id (or the target's, from its HELLO), else
// the ELF file's SHA-256. Functions of the same name in different builds may not be the same
// code, so a comparison of those says so first.
function firmwareNote(a: Session, b: Session) {
  const id = (s: Session) => ({ build: s.elf?.build_id || s.target?.build_id || "", sha: s.elf?.sha256 || "" });
  const fa = id(a);
  const fb = id(b);
  const short = (x: string) => x.slice(0, 12);
  let differ: string | null = null;
  if (fa.build && fb.build) {
    if (fa.build !== fb.build) differ = `build-id ${short(fa.build)} vs ${short(fb.build)}`;
  } else if (fa.sha && fb.sha) {
    if (fa.sha !== fb.sha) differ = `ELF SHA-256 ${short(fa.sha)} vs ${short(fb.sha)}`;
  } else {
    const unknown = [a, b].filter((s) => !id(s).build && !id(s).sha).map((s) => `#${s.id}`);
    return h("p", { class: "muted", id: "firmware-note" }, `Whether both ran the same firmware is unknown: no ELF for ${unknown.join(" and ") || "one of them"}.`);
  }
  if (!differ) return h("p", { class: "muted", id: "firmware-note" }, "Both sessions ran the same firmware.");
  return h(
    "p",
    { class: "notice warn", role: "alert", id: "firmware-warning" },
    `Different firmware (${differ}): functions of the same name may be different code, so their differences below are not only the run's.`,
  );
}

// More time is worse: red; less: green. (Only time: calls are shown neutral.)
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
