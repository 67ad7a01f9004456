import { describe, expect, it } from "vitest";
import { recentWindow, windowRate, type Seen } from "./rack";

describe("records/s over a window", () => {
  // A board sending 1000 records/s whose counter moves in bursts: 0, 1800, 1800, 4200, ...
  const polls: Seen[] = [0, 1000, 2000, 3000, 4000, 5000].map((at, i) => ({
    at,
    records: [0, 1800, 1800, 4200, 4200, 5000][i],
    session: 7,
  }));
  it("is steady where the rate between two polls zig-zags", () => {
    expect(windowRate(recentWindow(polls, 5000))).toBe(1000);
    expect(windowRate(polls.slice(1, 3))).toBe(0); // two polls alone said 0 here, 2400 next
  });
  it("forgets polls older than the window and those of another session", () => {
    const later = [...polls, { at: 5500, records: 10, session: 8 }];
    expect(recentWindow(later, 5500)).toEqual([{ at: 5500, records: 10, session: 8 }]);
    expect(recentWindow(polls, 9000).map((p) => p.at)).toEqual([4000, 5000]);
  });
  it("says nothing until the window spans half a second", () => {
    expect(windowRate(polls.slice(0, 1))).toBeNull();
    expect(windowRate([polls[0], { ...polls[0], at: 300 }])).toBeNull();
  });
});
