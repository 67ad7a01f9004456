import { describe, expect, it } from "vitest";
import type { Session } from "../api";
import { defaultPair } from "./sessions";

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
