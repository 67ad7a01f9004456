import { describe, expect, it } from "vitest";
import { compareValues, sortedBy, type SortValue } from "./sort";

const sorted = (values: SortValue[]) => [...values].sort(compareValues);

describe("compareValues", () => {
  it("orders numbers by value, not as text", () => {
    expect(sorted([10, 9, 100, 0.5])).toEqual([0.5, 9, 10, 100]);
  });
  it("orders text alphabetically", () => {
    expect(sorted(["gamma", "alpha", "beta"])).toEqual(["alpha", "beta", "gamma"]);
  });
  it("puts missing values first", () => {
    expect(compareValues(null, 0)).toBeLessThan(0);
    expect(compareValues(5, undefined)).toBeGreaterThan(0);
    expect(compareValues(null, null)).toBe(0);
    expect(sorted([3, null, 1])).toEqual([null, 1, 3]);
  });
  it("compares equal values as equal", () => {
    expect(compareValues(2, 2)).toBe(0);
    expect(compareValues("x", "x")).toBe(0);
  });
});

describe("sortedBy", () => {
  const rows = [{ n: 2 }, { n: null }, { n: 10 }];
  it("sorts a copy by a row's value, either way", () => {
    expect(sortedBy(rows, (r) => r.n, false).map((r) => r.n)).toEqual([null, 2, 10]);
    expect(sortedBy(rows, (r) => r.n, true).map((r) => r.n)).toEqual([10, 2, null]);
    expect(rows.map((r) => r.n)).toEqual([2, null, 10]);
  });
});
