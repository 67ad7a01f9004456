import { describe, expect, it } from "vitest";
import { compareRedirect } from "./diff";

describe("compareRedirect", () => {
  it("opens the old Compare page's two sessions on the Diff page", () => {
    expect(compareRedirect(new URLSearchParams("a=3&b=4"))).toBe(
      "/diff?a=session%3D3&b=session%3D4",
    );
  });
  it("drops what is not a session id", () => {
    expect(compareRedirect(new URLSearchParams("a=x&b=4"))).toBe("/diff?b=session%3D4");
    expect(compareRedirect(new URLSearchParams("a=3;drop"))).toBe("/diff");
    expect(compareRedirect(new URLSearchParams(""))).toBe("/diff");
  });
});
