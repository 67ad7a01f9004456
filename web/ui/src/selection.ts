// Selections as the API names them ("build_id=ab12&board=b1,b2&tag=lab", "session=7"): what a
// set of stored sessions is called in the dashboard's URLs, and the builds the stored sessions
// fall into.
import type { Session } from "./api";
import { h } from "./dom";

export interface Build {
  build_id: string;
  sessions: Session[];
  boards: string[];
  arch: string; // the core's architecture, as its sessions say ("" when none does)
}

// Sessions grouped by build-id, the build with most sessions first; sessions without one are
// left out (a fleet is one build).
export function buildsOf(sessions: Session[]): Build[] {
  const byBuild = new Map<string, Session[]>();
  for (const s of sessions) {
    if (!s.build_id) continue;
    byBuild.set(s.build_id, [...(byBuild.get(s.build_id) ?? []), s]);
  }
  return [...byBuild]
    .map(([build_id, list]) => ({
      build_id,
      sessions: list,
      boards: [...new Set(list.map((s) => s.board))].sort(),
      arch: list.find((s) => s.arch)?.arch ?? "",
    }))
    .sort((a, b) => b.sessions.length - a.sessions.length || a.build_id.localeCompare(b.build_id));
}

// The selection of a build, optionally narrowed to boards and tags (comma lists).
export function buildSelection(
  build_id: string,
  boards: string[] = [],
  tags: string[] = [],
): string {
  const q = new URLSearchParams({ build_id });
  if (boards.length) q.set("board", boards.join(","));
  if (tags.length) q.set("tag", tags.join(","));
  return q.toString().replace(/%2C/g, ","); // commas as people write them (the API reads both)
}

export const shortId = (id: string | null | undefined) => (id ? id.slice(0, 12) : "unknown build");

// A picker that fills a selection field: one session, or a whole build.
export function selectionPicker(target: HTMLInputElement, sessions: Session[], builds: Build[]) {
  return h(
    "select",
    {
      "aria-label": `Pick a session or a build for ${target.name.toUpperCase()}`,
      class: "picker",
      onchange: (e: Event) => {
        const value = (e.target as HTMLSelectElement).value;
        if (value) target.value = value;
        (e.target as HTMLSelectElement).value = "";
      },
    },
    h("option", { value: "" }, "pick…"),
    h(
      "optgroup",
      { label: "Builds (all their sessions)" },
      builds.map((b) =>
        h(
          "option",
          { value: buildSelection(b.build_id) },
          `${shortId(b.build_id)} · ${b.sessions.length} sessions, ${b.boards.length} boards`,
        ),
      ),
    ),
    h(
      "optgroup",
      { label: "Sessions" },
      [...sessions]
        .reverse()
        .map((s) =>
          h(
            "option",
            { value: `session=${s.id}` },
            `#${s.id} ${s.board}${s.build_id ? " · " + shortId(s.build_id) : ""}`,
          ),
        ),
    ),
  );
}
