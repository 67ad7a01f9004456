import { afterEach, describe, expect, it, vi } from "vitest";
import {
  clock,
  count,
  duration,
  intervalTitle,
  isOverhead,
  label,
  percent,
  plusMinus,
  seconds,
  signed,
  signedCount,
  time,
} from "./format";

describe("count", () => {
  it("groups thousands and rounds to an integer", () => {
    expect(count(0)).toBe("0");
    expect(count(1234567)).toBe("1,234,567");
    expect(count(2.6)).toBe("3");
  });
  it("shows a missing count as a dash", () => {
    expect(count(null)).toBe("—");
    expect(count(undefined)).toBe("—");
  });
});

describe("percent, seconds, plusMinus, intervalTitle", () => {
  it("prints two decimals", () => {
    expect(percent(12.3456)).toBe("12.35 %");
    expect(percent(0)).toBe("0.00 %");
    expect(seconds(1.5)).toBe("1.50");
    expect(seconds(0.004)).toBe("0.00");
  });
  it("prints an interval as half its width", () => {
    expect(plusMinus([10, 11])).toBe("±0.50");
    expect(plusMinus([2.25, 3.75])).toBe("±0.75");
    expect(plusMinus(undefined)).toBe("—");
  });
  it("names both bounds in the title", () => {
    expect(intervalTitle([1.234, 2.5], "%")).toBe("95 % Wilson score interval: 1.23–2.50 %");
    expect(intervalTitle(undefined, "%")).toBe("");
  });
});

describe("signed, signedCount", () => {
  it("uses a true minus sign and ± for no change", () => {
    expect(signed(1.234)).toBe("+1.23");
    expect(signed(-0.5)).toBe("−0.50");
    expect(signed(0)).toBe("±0.00");
    expect(signed(3, 0)).toBe("+3");
    expect(signedCount(-1234)).toBe("−1,234");
    expect(signedCount(56789)).toBe("+56,789");
    expect(signedCount(0)).toBe("±0");
  });
});

describe("time", () => {
  it("prints nanoseconds since the epoch as UTC, to the second", () => {
    expect(time(1_700_000_000_123_000_000)).toBe("2023-11-14 22:13:20");
  });
  it("shows no time as a dash", () => {
    expect(time(null)).toBe("—");
    expect(time(0)).toBe("—");
  });
});

describe("duration", () => {
  afterEach(() => {
    vi.useRealTimers();
  });
  it("uses seconds, then minutes, then hours", () => {
    expect(duration(0, 59e9)).toBe("59 s");
    expect(duration(0, 61e9)).toBe("1 min 1 s");
    expect(duration(0, 3599e9)).toBe("59 min 59 s");
    expect(duration(0, 3725e9)).toBe("1 h 2 min");
  });
  it("counts from the start, never below zero", () => {
    expect(duration(100e9, 130e9)).toBe("30 s");
    expect(duration(10e9, 5e9)).toBe("0 s");
  });
  it("runs until now while the session has no end", () => {
    vi.useFakeTimers();
    vi.setSystemTime(200_000); // ms since the epoch
    expect(duration(200_000e6 - 90e9, null)).toBe("1 min 30 s");
  });
});

describe("label, isOverhead", () => {
  it("spells counter keys with spaces", () => {
    expect(label("bytes_discarded")).toBe("bytes discarded");
    expect(label("records_lost_storage")).toBe("records lost storage");
  });
  it("knows the profiling runtime's own functions", () => {
    for (const name of ["__gnu_mcount_nc", "_mcount_internal", "mcount", "rackprof_flush"])
      expect(isOverhead(name)).toBe(true);
    for (const name of ["main", "my_mcount", "mcount2", "gamma"])
      expect(isOverhead(name)).toBe(false);
  });
});

describe("clock", () => {
  it("writes a time of day as ISO 8601 does, in UTC and 24 hours, whatever the locale", () => {
    expect(clock(Date.UTC(2026, 10, 27, 21, 5, 9) / 1000)).toBe("21:05:09");
  });
});

describe("label", () => {
  it("writes the live feed's not_capturing as words", () => {
    expect(label("not_capturing")).toBe("not capturing");
  });
});
