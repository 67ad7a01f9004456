// Sessions: the stored sessions with filters, downloads, and two picked for a diff.
import { api, downloads, rawExports, type Session } from "../api";
import { count, duration, time } from "../format";
import { downloadLinks, form, h, link, replace, selectField } from "../dom";
import { storageBadge } from "./rack";
import { navigate } from "../router";
import { diffForm } from "./diff";

export async function sessionsPage(main: HTMLElement, params: URLSearchParams) {
  const [sessions, boards] = await Promise.all([api.sessions(filterOf(params)), api.boards()]);
  const boardNames = [
    ...new Set([...boards.map((b) => b.name), ...sessions.map((s) => s.board)]),
  ].sort();
  const select = (name: string, label: string, options: string[]) =>
    selectField(`${label} `, name, [["", "any"], ...options], params.get(name));

  const filters = form(
    { class: "filters", role: "search" },
    (data) => {
      const query = new URLSearchParams();
      for (const [k, v] of data) if (typeof v === "string" && v) query.set(k, v);
      navigate(`/sessions${query.size ? `?${query}` : ""}`);
    },
    select("board", "Board", boardNames),
    select("state", "State", ["capturing", "completed", "interrupted"]),
    h("button", { type: "submit" }, "Filter"),
  );

  const [pairA, pairB] = defaultPair(sessions);
  replace(
    main,
    h("h1", {}, "Sessions"),
    filters,
    h(
      "table",
      { class: "data", id: "sessions" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...[
            "#",
            "Board",
            "Arch",
            "State",
            "Started",
            "Duration",
            "Records",
            "Discarded bytes",
            "Downloads",
            "",
          ].map((t) => h("th", { scope: "col" }, t)),
        ),
      ),
      h(
        "tbody",
        {},
        sessions.length
          ? [...sessions].reverse().map(row)
          : h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No sessions match.")),
      ),
    ),
    pager(sessions, params),
    h("h2", {}, "Compare two sessions or builds"),
    diffForm(sessions, pairA ? `session=${pairA.id}` : "", pairB ? `session=${pairB.id}` : ""),
  );
}

// The pair the compare form starts with: the newest session, and the newest before it of the
// same build (sessions of different builds cannot be compared function by function); none
// when no earlier session has its build.
export function defaultPair(sessions: Session[]): [Session | undefined, Session | undefined] {
  const b = sessions[sessions.length - 1];
  if (!b) return [undefined, undefined];
  const a = [...sessions.slice(0, -1)].reverse().find((s) => s.build_id === b.build_id);
  return [a, b];
}

function filterOf(params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of ["board", "state", "before"])
    if (params.get(key)) out[key] = params.get(key) as string;
  return out;
}

// The API lists a page at a time, the newest first (its default page); a full page may have
// older sessions, asked for with before= its smallest id.
export const kSessionPage = 1000;

export function pagerLinks(
  ids: number[],
  params: URLSearchParams,
): { href: string; text: string }[] {
  const at = (before?: number) => {
    const query = new URLSearchParams(params);
    query.delete("before");
    if (before !== undefined) query.set("before", String(before));
    return `/sessions${query.size ? `?${query}` : ""}`;
  };
  const out = [];
  if (params.get("before")) out.push({ href: at(), text: "Newest sessions" });
  if (ids.length >= kSessionPage) {
    const oldest = Math.min(...ids);
    out.push({ href: at(oldest), text: `Older sessions (before #${oldest})` });
  }
  return out;
}

function pager(sessions: Session[], params: URLSearchParams) {
  const links = pagerLinks(
    sessions.map((s) => s.id),
    params,
  );
  if (!links.length) return "";
  return h(
    "p",
    { class: "pager" },
    ...links.flatMap((l, i) => [i ? " · " : "", link(l.href, l.text)]),
  );
}

// The list keeps three downloads a row (formats every daemon has); the profile page has them all.
const listed = ["gmon", "csv", "raw"];

function row(s: Session) {
  const records = (s.counters.arcs ?? 0) + (s.counters.pc_samples ?? 0);
  return h(
    "tr",
    { "data-session": s.id },
    h("th", { scope: "row" }, link(`/sessions/${s.id}`, `#${s.id}`)),
    h("td", {}, s.board),
    h("td", {}, s.arch ?? "—"),
    h(
      "td",
      {},
      h("span", { class: `state state-${s.state}` }, s.state),
      storageBadge(s.storage_state, s.storage_error),
    ),
    h("td", {}, time(s.started_ns)),
    h("td", {}, duration(s.started_ns, s.ended_ns)),
    h("td", { class: "num" }, count(records)),
    h(
      "td",
      { class: `num ${s.counters.bytes_discarded ? "warn" : ""}` },
      count(s.counters.bytes_discarded),
    ),
    h(
      "td",
      {},
      downloadLinks(
        downloads(s.id, s.raw_pruned ? listed.filter((f) => !rawExports.includes(f)) : listed),
        " · ",
      ),
    ),
    h(
      "td",
      {},
      link(`/sessions/${s.id}`, "Profile"),
      s.state === "capturing" ? [" · ", link(`/live/${s.id}`, "Live")] : "",
    ),
  );
}
