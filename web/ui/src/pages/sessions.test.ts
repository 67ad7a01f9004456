import { describe, expect, it } from "vitest";
import type { Session } from "../api";
import { defaultPair, kSessionPage, pagerLinks } from "./sessions";

const session = (id: number, build_id: string | null) => ({ id, build_id }) as Session;

describe("defaultPair", () => {
  it("pairs the newest session with the newest earlier one of its build", () => {
    const sessions = [session(1, "aa"), session(2, "aa"), session(3, "bb"), session(4, "aa")];
    const [a, b] = defaultPair(sessions);
    expect(a?.id).toBe(2);
    expect(b?.id).toBe(4);
  });
  it("leaves A empty when no earlier session has the newest one's build", () => {
    const [a, b] = defaultPair([session(1, "aa"), session(2, "bb")]);
    expect(a).toBeUndefined();
    expect(b?.id).toBe(2);
  });
  it("has nothing to offer without sessions", () => {
    expect(defaultPair([])).toEqual([undefined, undefined]);
  });
});

describe("pagerLinks", () => {
  const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
  it("offers older sessions only after a full page, before its smallest id, filters kept", () => {
    expect(pagerLinks(ids(5, kSessionPage - 1), new URLSearchParams("board=b1"))).toEqual([]);
    expect(pagerLinks(ids(5, kSessionPage), new URLSearchParams("board=b1"))).toEqual([
      { href: "/sessions?board=b1&before=5", text: "Older sessions (before #5)" },
    ]);
  });
  it("leads back to the newest from an older page", () => {
    expect(pagerLinks(ids(1, 3), new URLSearchParams("before=4&state=completed"))).toEqual([
      { href: "/sessions?state=completed", text: "Newest sessions" },
    ]);
  });
});
